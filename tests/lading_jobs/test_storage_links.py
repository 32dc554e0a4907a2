"""``file://`` in a pod: only under the prefixes the operator renders, and no link below one is followed.

Each test plants a symbolic link under an allowed prefix pointing outside it (another tenant's
directory, a secret file) and checks that nothing is read, listed, written nor deleted through it.
They fail on main, where LocalStorage opened paths with ``open(2)`` and walked with ``os.walk``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lading_jobs.storage import LocalStorage, PendingUpload, StorageError, open_storage
from lading_spec import localfiles


@pytest.fixture
def place(tmp_path: Path) -> tuple[Path, Path, LocalStorage]:
    """(the allowed prefix, another tenant's directory holding a secret, storage confined to the prefix)."""
    allowed, other = tmp_path / "team-a", tmp_path / "team-b"
    allowed.mkdir()
    other.mkdir()
    (other / "secret.csv").write_text("password,hunter2\n")
    (allowed / "mine.csv").write_text("a\n1\n")
    return allowed, other, LocalStorage((f"file://{allowed}/",))


def test_a_linked_file_is_neither_read_nor_listed(place: tuple[Path, Path, LocalStorage]) -> None:
    allowed, other, storage = place
    (allowed / "stolen.csv").symlink_to(other / "secret.csv")
    uri = f"file://{allowed}/stolen.csv"
    with pytest.raises(StorageError, match="symbolic link"):
        storage.read(uri)
    with pytest.raises(OSError, match="symbolic link"):
        storage.read_range(uri, 0, 5)
    with pytest.raises(OSError, match="symbolic link"):
        storage.open_input(uri)
    assert storage.head(uri) is None
    listed = [o.uri for o in storage.list_objects(f"file://{allowed}/")]
    assert listed == [f"file://{allowed}/mine.csv"]
    assert [o.uri for o in storage.list_matching(f"file://{allowed}/*.csv")] == listed


def test_a_linked_directory_is_not_walked_read_written_or_deleted_through(
        place: tuple[Path, Path, LocalStorage]) -> None:
    allowed, other, storage = place
    (allowed / "in").symlink_to(other, target_is_directory=True)
    through = f"file://{allowed}/in/secret.csv"
    assert [o.uri for o in storage.list_objects(f"file://{allowed}/")] == [f"file://{allowed}/mine.csv"]
    with pytest.raises(OSError, match="symbolic link"):
        list(storage.list_objects(f"file://{allowed}/in/"))
    with pytest.raises(StorageError, match="symbolic link"):
        storage.read(through)
    assert storage.head(through) is None
    for write in (lambda: storage.put(f"file://{allowed}/in/new.csv", b"x"),
                  lambda: storage.put_if_absent(f"file://{allowed}/in/new.csv", b"x"),
                  lambda: storage.put_hint(f"file://{allowed}/in/new.csv", b"x"),
                  lambda: storage.begin_upload(f"file://{allowed}/in/new.csv")):
        with pytest.raises(OSError, match="symbolic link"):
            write()
    with pytest.raises(OSError, match="symbolic link"):
        storage.delete([through])
    assert sorted(p.name for p in other.iterdir()) == ["secret.csv"]  # nothing written, nothing deleted
    assert (other / "secret.csv").read_text() == "password,hunter2\n"


def test_writing_over_a_link_replaces_the_link_not_its_target(place: tuple[Path, Path, LocalStorage]) -> None:
    allowed, other, storage = place
    link = allowed / "out.csv"
    link.symlink_to(other / "secret.csv")
    storage.put(f"file://{allowed}/out.csv", b"mine")
    assert not link.is_symlink() and link.read_bytes() == b"mine"
    assert (other / "secret.csv").read_text() == "password,hunter2\n"
    link.unlink()
    link.symlink_to(other / "secret.csv")
    assert storage.put_if_absent(f"file://{allowed}/out.csv", b"mine") is False  # the name is taken
    storage.delete([f"file://{allowed}/out.csv"])  # the link goes, never what it points at
    assert not link.is_symlink() and (other / "secret.csv").exists()


def test_a_linked_staging_directory_or_part_is_refused(place: tuple[Path, Path, LocalStorage]) -> None:
    allowed, other, storage = place
    (allowed / ".lading-staging").symlink_to(other, target_is_directory=True)
    with pytest.raises(OSError, match="symbolic link"):
        storage.put(f"file://{allowed}/x.csv", b"x")
    (allowed / ".lading-staging").unlink()
    upload = storage.begin_upload(f"file://{allowed}/y.csv")
    part = Path(upload.upload_id)
    part.unlink()
    part.symlink_to(other / "secret.csv")
    with pytest.raises(OSError, match="symbolic link"):
        storage.upload_part(upload, b"appended")
    with pytest.raises(OSError, match="symbolic link"):
        storage.complete_upload(PendingUpload(upload.uri, upload.upload_id))
    assert (other / "secret.csv").read_text() == "password,hunter2\n"
    assert not (allowed / "y.csv").exists()


def test_paths_outside_the_prefixes_are_refused(place: tuple[Path, Path, LocalStorage]) -> None:
    allowed, other, storage = place
    with pytest.raises(StorageError, match="outside the file:// prefixes"):
        storage.read(f"file://{other}/secret.csv")
    with pytest.raises(StorageError, match="outside the file:// prefixes"):
        list(storage.list_objects(f"file://{other}/"))
    with pytest.raises(StorageError, match=r"'\.\.'"):
        storage.read(f"file://{allowed}/../team-b/secret.csv")
    with pytest.raises(StorageError, match="outside"):
        storage.read("file:///proc/self/environ")


def test_in_a_pod_file_is_refused_unless_the_operator_lists_a_prefix(
        place: tuple[Path, Path, LocalStorage], monkeypatch: pytest.MonkeyPatch) -> None:
    allowed, _, _ = place
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.delenv(localfiles.PREFIXES_ENV, raising=False)
    with pytest.raises(StorageError, match="file:// is not allowed here"):
        open_storage(f"file://{allowed}/").read(f"file://{allowed}/mine.csv")
    monkeypatch.setenv(localfiles.PREFIXES_ENV, json.dumps([f"file://{allowed}/"]))
    assert open_storage(f"file://{allowed}/").read(f"file://{allowed}/mine.csv") == b"a\n1\n"
    monkeypatch.setenv(localfiles.PREFIXES_ENV, json.dumps(["file:///var/run/"]))
    with pytest.raises(StorageError, match="may never open"):
        open_storage(f"file://{allowed}/")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    monkeypatch.delenv(localfiles.PREFIXES_ENV)
    assert open_storage(f"file://{allowed}/").read(f"file://{allowed}/mine.csv") == b"a\n1\n"  # a laptop


def test_a_prefix_root_that_links_to_a_forbidden_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "data").symlink_to("/proc", target_is_directory=True)
    with pytest.raises(StorageError, match="/proc"):
        LocalStorage((f"file://{tmp_path}/data/",))


def test_a_confined_storage_still_does_its_work(place: tuple[Path, Path, LocalStorage]) -> None:
    """Uploads, listings, create-if-absent and deletes below the prefix work as on a laptop."""
    allowed, _, storage = place
    root = f"file://{allowed}/t/"
    upload = storage.begin_upload(root + "d/part.csv")
    storage.upload_part(upload, b"ab")
    assert [u.uri for u in storage.list_pending_uploads(root)] == [root + "d/part.csv"]
    storage.complete_upload(upload)
    assert storage.put_if_absent(root + "log/0.json", b"{}") is True
    assert storage.put_if_absent(root + "log/0.json", b"{}") is False
    assert [o.uri for o in storage.list_objects(root)] == [root + "d/part.csv", root + "log/0.json"]
    assert storage.read_range(root + "d/part.csv", 1, 2) == b"b"
    with storage.open_input(root + "d/part.csv") as f:
        assert f.read() == b"ab"
    storage.delete([root + "d/part.csv"])
    assert storage.head(root + "d/part.csv") is None
    assert storage.list_pending_uploads(root) == [] and not os.path.exists(allowed / "t" / "d" / ".lading-staging")
