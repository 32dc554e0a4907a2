"""The storage interface against the real S3 API server and the local filesystem."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lading_jobs.storage import (
    LocalStorage,
    S3Settings,
    S3Storage,
    Storage,
    StorageError,
    open_storage,
)
from lading_spec.errors import SpecError


@pytest.fixture(params=["s3", "file"])
def root(request: pytest.FixtureRequest, file_uri: Callable[[str], str]) -> str:
    if request.param == "s3":
        bucket = request.getfixturevalue("bucket")
        return f"s3://{bucket}/root/"
    return file_uri("root/")


def test_open_storage_by_scheme(root: str) -> None:
    expected = S3Storage if root.startswith("s3://") else LocalStorage
    assert isinstance(open_storage(root), expected)


def test_pending_upload_is_invisible_until_completed(root: str) -> None:
    storage: Storage = open_storage(root)
    upload = storage.begin_upload(root + "a/part-0.bin")
    storage.upload_part(upload, b"x" * (5 * 1024 * 1024))
    storage.upload_part(upload, b"tail")
    assert list(storage.list_objects(root)) == []
    assert len(storage.list_pending_uploads(root)) == 1
    storage.complete_upload(upload)
    objects = list(storage.list_objects(root))
    assert [o.uri for o in objects] == [root + "a/part-0.bin"]
    assert objects[0].size == 5 * 1024 * 1024 + 4
    assert storage.list_pending_uploads(root) == []
    assert storage.read_range(root + "a/part-0.bin", 5 * 1024 * 1024, 5 * 1024 * 1024 + 4) == b"tail"


def test_aborted_upload_leaves_nothing(root: str) -> None:
    storage = open_storage(root)
    upload = storage.begin_upload(root + "b.bin")
    storage.upload_part(upload, b"data")
    storage.abort_upload(upload)
    assert list(storage.list_objects(root)) == []
    assert storage.list_pending_uploads(root) == []


def test_put_if_absent_has_one_winner(root: str) -> None:
    storage = open_storage(root)
    assert storage.put_if_absent(root + "log/00000001.json", b"first") is True
    assert storage.put_if_absent(root + "log/00000001.json", b"second") is False
    assert storage.read(root + "log/00000001.json") == b"first"


def test_glob_listing_and_parquet_random_access(root: str) -> None:
    storage = open_storage(root)
    table = pa.table({"x": list(range(1000))})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=100)
    storage.put(root + "data/one.parquet", sink.getvalue().to_pybytes())
    storage.put(root + "data/notes.txt", b"hello")
    found = storage.list_matching(root + "data/*.parquet")
    assert [o.uri for o in found] == [root + "data/one.parquet"]
    with storage.open_input(found[0].uri, found[0].size) as f:
        reader = pq.ParquetFile(f)
        assert reader.metadata.num_row_groups == 10
        assert reader.read_row_group(3).column("x").to_pylist() == list(range(300, 400))
    storage.delete([o.uri for o in storage.list_objects(root)])
    assert list(storage.list_objects(root)) == []


def test_file_writes_are_fsynced_before_they_become_visible(file_uri: Callable[[str], str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on 1b6c3cc: file:// never fsynced (a crash could leave a renamed but empty file)."""
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    root, storage = file_uri("sync/"), LocalStorage()
    storage.put(root + "a.json", b"{}")
    assert len(synced) >= 2  # the file, then its directory
    synced.clear()
    assert storage.put_if_absent(root + "b.json", b"{}")
    assert len(synced) >= 2
    synced.clear()
    upload = storage.begin_upload(root + "c.csv")
    storage.upload_part(upload, b"1,2\n")
    storage.complete_upload(upload)
    assert len(synced) >= 2


def test_file_upload_parts_start_their_writeback_as_they_are_written(file_uri: Callable[[str], str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Each appended part asks the kernel to start writing exactly its bytes to the disk, so a
    commit's fsync finds them written or on their way (a compaction's four 181 MB outputs were
    written back only by the driver's fsyncs, one after another); completing still fsyncs the
    file before the rename. Fails on 25f4543: nothing started the write-back before that fsync."""
    from lading_jobs import storage as st

    asked: list[tuple[int, int, int, bool]] = []
    real = st.start_writeback

    def spy(fd: int, offset: int, length: int) -> bool:
        ok = real(fd, offset, length)
        asked.append((os.fstat(fd).st_size, offset, length, ok))
        return ok

    monkeypatch.setattr(st, "start_writeback", spy)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.fstat(fd).st_size), real_fsync(fd))[1])
    root, storage = file_uri("writeback/"), LocalStorage()
    upload = storage.begin_upload(root + "part.parquet")
    storage.upload_part(upload, b"a" * 70_000)
    storage.upload_part(upload, b"b" * 5)
    # the range just appended, each time, and the kernel took the request (Linux has the call)
    assert [a[:3] for a in asked] == [(70_000, 0, 70_000), (70_005, 70_000, 5)]
    assert all(a[3] for a in asked) or not sys.platform.startswith("linux")
    storage.complete_upload(upload)
    assert 70_005 in synced  # durability unchanged: the whole file is fsynced before it is visible
    assert storage.read(root + "part.parquet") == b"a" * 70_000 + b"b" * 5


def test_a_crash_mid_write_leaves_no_visible_temporary_file(file_uri: Callable[[str], str]) -> None:
    """A process killed between writing the temporary file and renaming it: listings show
    nothing (fails on 1b6c3cc: ``.a.json.<uuid>.tmp`` was listed beside the real files)."""
    root = file_uri("crash/")
    script = ("import os, signal, sys; sys.path.insert(0, sys.argv[2]); "
              "from lading_jobs.storage import LocalStorage; "
              "os.replace = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL); "
              "LocalStorage().put(sys.argv[1] + 'a.json', b'{}')")
    spark_apps = str(Path(__file__).resolve().parents[2] / "spark_apps")
    child = subprocess.run([sys.executable, "-c", script, root, spark_apps], capture_output=True, timeout=60)
    assert child.returncode == -9, child.stderr
    storage = LocalStorage()
    assert list(storage.list_objects(root)) == [] and storage.list_matching(root) == []
    assert storage.list_pending_uploads(root) == []


def test_file_pending_uploads_name_their_key(file_uri: Callable[[str], str]) -> None:
    root, storage = file_uri("p/"), LocalStorage()
    upload = storage.begin_upload(root + "x/part-00000-00000-1a2b3c4d.csv")
    assert [u.uri for u in storage.list_pending_uploads(root)] == [upload.uri]
    storage.abort_upload(upload)
    assert storage.list_pending_uploads(root) == []


def test_a_part_sink_refuses_a_ten_thousand_and_first_part(file_uri: Callable[[str], str]) -> None:
    """S3 rejects part 10,001 at completion; the sink says so when it would send it."""
    from lading_jobs.sink import MAX_PARTS, PartSink
    from lading_jobs.storage import StorageError

    sink = PartSink(LocalStorage(), file_uri("big/") + "f.bin", 0)
    sink.upload.parts = [{"PartNumber": n, "ETag": "x"} for n in range(1, MAX_PARTS + 1)]
    with pytest.raises(StorageError, match="at most 10000 parts"):
        sink.write(b"x" * sink.buffer_size)  # a full buffer: the 10,001st part
    sink.abort()


def test_endpoint_with_credentials_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever names the endpoint (the spec or the environment), user:password@ is refused, naming it."""
    with pytest.raises(SpecError, match="connection.endpoint: must not carry credentials"):
        S3Settings.from_env(endpoint="http://key:secret@127.0.0.1:9000")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://key:secret@127.0.0.1:9000")
    with pytest.raises(SpecError, match="AWS_ENDPOINT_URL: must not carry credentials"):
        S3Settings.from_env()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000")
    assert S3Settings.from_env().endpoint == "http://127.0.0.1:9000"
    with pytest.raises(SpecError, match="must not carry credentials"):
        S3Settings(endpoint="http://key:secret@127.0.0.1:9000")


def test_an_endpoint_name_that_resolves_to_the_metadata_service_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name the spec check cannot judge is resolved before the client exists. No resolver here
    answers with a link-local address, so the DNS answer is stood in for (only that call)."""
    real = socket.getaddrinfo

    def answer(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == "s3.attacker.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 0))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", answer)
    with pytest.raises(StorageError, match="link-local address .* check connection.endpoint"):
        S3Storage(S3Settings(endpoint="http://s3.attacker.example:9000"))
    S3Storage(S3Settings(endpoint="http://localhost:9000"))  # loopback (a sidecar, the tests' server) is fine
    # a Delta input's log is read by deltalake, which dials the endpoint itself: checked before it is handed over
    from lading_jobs.sources import delta
    from lading_spec.copyjob import DeltaInput
    with pytest.raises(StorageError, match="link-local address .* check connection.endpoint"):
        delta.open_table(DeltaInput("s3://latest/meta-data/"), "from.inputs[0].delta",
                         S3Settings(endpoint="http://s3.attacker.example:9000"))


def run_together(work: Callable[[int], None], count: int) -> None:
    """``work(0)`` … ``work(count - 1)``, each on its own thread, all joined."""
    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_local_uploads_in_one_directory_survive_each_others_clean_up(file_uri: Callable[[str], str]) -> None:
    """An aborted upload removes its empty staging directory; another task's upload beside it
    must not fail when that happens between its ``mkdir`` and its create (seen in CI as
    ``FileNotFoundError`` from a transform load whose other task had just aborted)."""
    storage, root = LocalStorage(), file_uri("race/")
    failures: list[BaseException] = []

    def churn(worker: int) -> None:
        try:
            for i in range(400):
                upload = storage.begin_upload(f"{root}d/part-{worker}-{i}.bin")
                if i % 2:
                    storage.abort_upload(upload)
                else:
                    storage.upload_part(upload, b"x")
                    storage.complete_upload(upload)
                storage.put(f"{root}d/marker-{worker}", b"m")
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append(e)

    run_together(churn, 6)
    assert failures == []
    assert storage.list_pending_uploads(root) == []
    assert len([o for o in storage.list_objects(root + "d/") if "/part-" in o.uri]) == 6 * 200


def test_local_listing_and_head_skip_objects_deleted_while_they_run(file_uri: Callable[[str], str]) -> None:
    """A listing walks, then stats each file: one deleted in between is left out, not an error
    (an S3 listing may or may not show an object deleted during it; it never fails)."""
    storage, root = LocalStorage(), file_uri("churn/")
    stop = threading.Event()

    def churn() -> None:
        i = 0
        while not stop.is_set():
            uri = f"{root}f-{i % 50}"
            storage.put(uri, b"x")
            storage.delete([uri])
            i += 1

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        for _ in range(300):
            assert all(o.uri.startswith(root) for o in storage.list_objects(root))
            head = storage.head(root + "f-7")
            assert head is None or head.size == 1
    finally:
        stop.set()
        thread.join()


def test_concurrent_put_if_absent_of_one_key_has_one_winner(root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The table log's commit relies on it: of writers racing to create one key, exactly one
    wins and the others see ``False`` (on S3: 412). moto checks the condition and stores the
    object in two steps; a pause between them (here 50 ms, in CI a thread switch) let two
    writers win and the second overwrite the first, until tests/support/moto_atomic.py."""
    if root.startswith("s3://"):
        from moto.s3.models import S3Backend

        store = S3Backend.put_object

        def slow_store(self: Any, *args: Any, **kwargs: Any) -> Any:
            time.sleep(0.05)  # widen the check-then-store window
            return store(self, *args, **kwargs)

        monkeypatch.setattr(S3Backend, "put_object", slow_store)
    storage = open_storage(root)
    for round_ in range(5):
        uri = f"{root}log/{round_:05d}.json"
        barrier = threading.Barrier(4)
        won: list[int] = []

        def race(writer: int, uri: str = uri, barrier: threading.Barrier = barrier,
                 won: list[int] = won) -> None:
            barrier.wait()
            if storage.put_if_absent(uri, f"writer {writer}".encode()):
                won.append(writer)

        run_together(race, 4)
        assert len(won) == 1, f"round {round_}: winners {won}"
        assert storage.read(uri) == f"writer {won[0]}".encode()


def test_keys_are_taken_as_written_on_both_schemes(root: str) -> None:
    # A Hive-escaped partition value (k=a%2Fb), a '#', a '?' and a space are part of the key, as on
    # S3 and in Spark's (Hadoop's) paths: nothing is percent-decoded and nothing is cut off as a
    # query or fragment. Before, file:// decoded %2F into a directory the manifest does not name.
    storage = open_storage(root)
    names = ["k=a%2Fb/part-0.csv", "x#1.csv", "what?.csv", "a b%20c.csv"]
    for i, name in enumerate(names):
        storage.put(root + name, b"%d\n" % i)
    listed = sorted(o.uri for o in storage.list_objects(root))
    assert listed == sorted(root + name for name in names)
    for i, name in enumerate(names):
        assert storage.read(root + name) == b"%d\n" % i
    if root.startswith("file://"):
        base = root[len("file://"):]
        assert sorted(set(os.listdir(base)) - {".lading-staging"}) == sorted(["k=a%2Fb", "x#1.csv", "what?.csv", "a b%20c.csv"])


@pytest.mark.parametrize(("glob", "uri", "matches"), [
    ("s3://b/raw/*.csv", "s3://b/raw/a.csv", True),
    ("s3://b/raw/*.csv", "s3://b/raw/sub/a.csv", False),   # '*' stays within its segment, as in Spark
    ("s3://b/raw/*/x.csv", "s3://b/raw/d/x.csv", True),
    ("s3://b/raw/a?c.csv", "s3://b/raw/a/c.csv", False),
    ("s3://b/raw/[ab].csv", "s3://b/raw/b.csv", True),
    ("s3://b/raw/[!ab].csv", "s3://b/raw/a.csv", False),
    ("s3://b/raw/[!ab].csv", "s3://b/raw/c.csv", True),
    ("s3://b/raw/[^a].csv", "s3://b/raw/^.csv", True),     # '^' is no negation in a glob
    ("s3://b/raw/x.csv*", "s3://b/raw/x.csv.gz", True),
    ("s3://b/raw/x[.csv", "s3://b/raw/x[.csv", True),      # an unclosed '[' is itself
    ("s3://b/raw/2026-*.csv", "s3://b/raw/2026-01.csvx", False),
])
def test_a_glob_star_stays_within_one_path_segment(glob: str, uri: str, matches: bool) -> None:
    from lading_jobs.storage import glob_regex

    assert bool(glob_regex(glob).match(uri)) is matches


def test_glob_listing_does_not_descend_into_subdirectories(root: str) -> None:
    # Before, fnmatch's '*' crossed '/': raw/*.csv also read raw/old/*.csv.
    storage = open_storage(root)
    for name in ("raw/a.csv", "raw/b.csv", "raw/old/c.csv", "raw/x.json"):
        storage.put(root + name, b"1\n")
    assert [o.uri for o in storage.list_matching(root + "raw/*.csv")] == [root + "raw/a.csv", root + "raw/b.csv"]
    assert [o.uri for o in storage.list_matching(root + "raw/*/*.csv")] == [root + "raw/old/c.csv"]
