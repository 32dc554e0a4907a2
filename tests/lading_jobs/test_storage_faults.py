"""S3Storage under faults on the wire (tests/support/faultproxy.py in front of moto): every call is
retried by the one policy (lading_jobs.retry), GET bodies included; what still fails is a
StorageError naming the object, the operation and the fault; a lost CreateMultipartUpload answer
leaves no extra pending upload; attempts never multiply.

Issue 46, items 3 (a truncated body), 4 (resets surfacing as ConnectionClosedError) and 5 (an
extra pending upload): the regression tests below fail on the storage layer before the policy."""

from __future__ import annotations

import io
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.faultproxy import Fault, FaultProxy, Kind, Rates

from lading_jobs import retry
from lading_jobs.storage import S3Settings, S3Storage, StorageError

pytestmark = pytest.mark.s3

FAST = retry.Policy(attempts=6, deadline=30.0, base=0.01, cap=0.05)
"""The default policy's attempts with short waits: the same requests, less sleeping."""


@pytest.fixture
def proxy(fault_proxy: FaultProxy) -> FaultProxy:
    fault_proxy.seed = 46  # a fixed seed: the same requests faulted each run
    return fault_proxy


def storage(proxy: FaultProxy, policy: retry.Policy | None = FAST) -> S3Storage:
    """Through the proxy; ``policy=None``: as jobs make it (the default policy), which the regression
    tests of items 3-5 use, so that they also run on the storage layer before the policy."""
    settings = S3Settings(endpoint=proxy.url, region="us-east-1")
    return S3Storage(settings) if policy is None else S3Storage(settings, policy)


def plan(proxy: FaultProxy, kind: Kind, fault: Fault, times: int, match: str = "") -> None:
    """The next ``times`` requests of ``kind`` (whose path contains ``match``) get ``fault``."""
    for _ in range(times):
        proxy.plan(kind, fault, nth=1, match=match)


def parquet_bytes(rows: int = 20000) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(rows)), "s": [f"row {i}" for i in range(rows)]}), buf,
                   row_group_size=rows // 4)
    return buf.getvalue()


# -- item 3: the body is read inside the retry ----------------------------------------------------
@pytest.mark.parametrize("fault", [Fault.TRUNCATE, Fault.RESET_BEFORE, Fault.ERROR_5XX, Fault.SLOWDOWN])
def test_a_read_is_retried_through_a_broken_body_a_reset_or_an_error_answer(
        proxy: FaultProxy, bucket: str, s3_client: object, fault: Fault) -> None:
    data = bytes(range(256)) * 400
    uri = f"s3://{bucket}/in/object.bin"
    s3 = storage(proxy, None)
    s3.put(uri, data)
    etag = s3.head(uri).etag  # type: ignore[union-attr]
    plan(proxy, Kind.GET, fault, 2)
    assert s3.read(uri) == data
    plan(proxy, Kind.GET, fault, 2)
    assert s3.read(uri, etag=etag) == data
    plan(proxy, Kind.GET, fault, 2)
    assert s3.read_range(uri, 1000, 60000) == data[1000:60000]
    assert [i.fault for i in proxy.injected] == [fault] * 6


def test_a_parquet_file_read_through_open_input_survives_truncated_range_reads(
        proxy: FaultProxy, bucket: str) -> None:
    """pyarrow's reads (footer, then row groups) go through ``_RangeReader`` → ``read_range``."""
    data = parquet_bytes()
    uri = f"s3://{bucket}/in/t.parquet"
    s3 = storage(proxy, None)
    s3.put(uri, data)
    proxy.set_rates({Kind.GET: Rates(truncate=0.5)})
    with s3.open_input(uri, len(data)) as f:
        table = pq.read_table(f)
    assert table.column("id").to_pylist() == list(range(20000))
    assert any(i.fault is Fault.TRUNCATE for i in proxy.injected)


def test_a_body_cut_short_every_time_fails_naming_the_object_and_the_fault(
        proxy: FaultProxy, bucket: str) -> None:
    uri = f"s3://{bucket}/in/object.bin"
    s3 = storage(proxy)
    s3.put(uri, b"x" * 100000)
    plan(proxy, Kind.GET, Fault.TRUNCATE, FAST.attempts)
    with pytest.raises(StorageError) as caught:
        s3.read(uri)
    message = str(caught.value)
    assert message.startswith(f"reading {uri} failed after {FAST.attempts} attempts in ")
    assert ": the answer's body was cut short" in message and "run again" in message
    assert caught.value.uri == uri
    assert proxy.counts[Kind.GET] == FAST.attempts


# -- item 4: resets on GET, LIST and HEAD are a lading error naming the object ----------------------
@pytest.mark.parametrize(("kind", "call", "what"), [
    (Kind.GET, lambda s, u: s.read(u), "reading"),
    (Kind.HEAD, lambda s, u: s.head(u), "reading"),
    (Kind.LIST, lambda s, u: list(s.list_objects(u)), "listing"),
])
def test_resets_that_outlast_the_policy_are_a_storage_error_naming_the_object(
        proxy: FaultProxy, bucket: str, kind: Kind, call: object, what: str) -> None:
    uri = f"s3://{bucket}/in/object.bin"
    s3 = storage(proxy, None)
    s3.put(uri, b"abc")
    plan(proxy, kind, Fault.RESET_BEFORE, retry.DEFAULT.attempts)
    with pytest.raises(StorageError) as caught:
        call(s3, uri)  # type: ignore[operator]
    assert str(caught.value).startswith(f"{what} {uri} failed after {retry.DEFAULT.attempts} attempts in ")
    assert ": the connection was reset (ConnectionClosedError); " in str(caught.value)
    assert "kept failing" in str(caught.value)
    assert proxy.counts[kind] == retry.DEFAULT.attempts  # botocore made no attempts of its own on top


def test_a_listing_resumes_at_the_page_that_failed(proxy: FaultProxy, bucket: str, s3_client: object) -> None:
    for i in range(5):
        s3_client.put_object(Bucket=bucket, Key=f"many/{i:05d}", Body=b"")  # type: ignore[attr-defined]
    s3 = storage(proxy)
    proxy.plan(Kind.LIST, Fault.RESET_BEFORE, nth=2)  # the second page's request
    listed = s3._objects(f"s3://{bucket}/many/", MaxKeys=2)  # three pages of two keys at most
    assert [o.uri.rsplit("/", 1)[-1] for o in listed] == [f"{i:05d}" for i in range(5)]
    assert proxy.counts[Kind.LIST] == 4  # page 1, page 2 reset, page 2 again, page 3: not page 1 again


# -- item 5: a lost CreateMultipartUpload answer leaves no extra pending upload -----------------------
@pytest.mark.parametrize("fault", [Fault.RESET_AFTER, Fault.ERROR_5XX])
def test_a_create_whose_answer_was_lost_leaves_only_the_upload_in_use(
        proxy: FaultProxy, bucket: str, s3_client: object, fault: Fault) -> None:
    uri = f"s3://{bucket}/out/part-00000.csv"
    s3 = storage(proxy, None)
    proxy.plan(Kind.CREATE_MULTIPART, fault, nth=1)
    upload = s3.begin_upload(uri)
    pending = s3_client.list_multipart_uploads(Bucket=bucket)  # type: ignore[attr-defined]
    assert [(u["Key"], u["UploadId"]) for u in pending.get("Uploads", [])] == [("out/part-00000.csv",
                                                                                 upload.upload_id)]
    s3.upload_part(upload, b"hello")
    s3.complete_upload(upload)
    assert s3.read(uri) == b"hello"


def test_a_create_that_fails_for_good_leaves_no_pending_upload(proxy: FaultProxy, bucket: str,
                                                               s3_client: object) -> None:
    uri = f"s3://{bucket}/out/part-00001.csv"
    s3 = storage(proxy)
    plan(proxy, Kind.CREATE_MULTIPART, Fault.RESET_AFTER, FAST.attempts)  # every attempt lands, no answer
    with pytest.raises(StorageError, match=f"starting an upload to {uri} failed after 6 attempts in .*: the connection was reset"):
        s3.begin_upload(uri)
    assert s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []  # type: ignore[attr-defined]


def test_an_upload_pending_on_another_key_is_left_alone(proxy: FaultProxy, bucket: str, s3_client: object) -> None:
    """Only uploads to exactly this key are a lost answer's (a listing by prefix also shows longer keys)."""
    other = s3_client.create_multipart_upload(Bucket=bucket, Key="out/part-00000.csv.bak")  # type: ignore[attr-defined]
    s3 = storage(proxy)
    proxy.plan(Kind.CREATE_MULTIPART, Fault.RESET_AFTER, nth=1)
    upload = s3.begin_upload(f"s3://{bucket}/out/part-00000.csv")
    ids = {u["UploadId"] for u in s3_client.list_multipart_uploads(Bucket=bucket)["Uploads"]}  # type: ignore[attr-defined]
    assert ids == {other["UploadId"], upload.upload_id}


# -- the policy's bounds: attempts, time, no multiplication -----------------------------------------
@pytest.mark.parametrize("fault", [Fault.ERROR_5XX, Fault.SLOWDOWN, Fault.RESET_BEFORE])
def test_a_store_that_always_fails_gets_exactly_the_policys_attempts(
        proxy: FaultProxy, bucket: str, fault: Fault) -> None:
    proxy.set_rates(Rates(**{fault.value: 1.0}))
    s3 = storage(proxy)
    with pytest.raises(StorageError, match=f"writing s3://{bucket}/k failed after 6 attempts in "):
        s3.put(f"s3://{bucket}/k", b"x")
    assert proxy.total() == FAST.attempts


def test_an_answer_that_never_comes_times_out_and_the_call_ends_within_its_bound(
        proxy: FaultProxy, bucket: str) -> None:
    """A store that holds every answer past the read timeout: each attempt times out, the call gives
    up naming the fault, and it ends within ``Policy.longest`` (no hang)."""
    policy = retry.Policy(attempts=3, deadline=10.0, base=0.01, cap=0.05, connect_timeout=1.0, read_timeout=0.3)
    uri = f"s3://{bucket}/slow"
    s3 = storage(proxy, policy)
    s3.put(uri, b"late")
    proxy.set_rates({Kind.GET: Rates(delay=1.0, delay_seconds=1.0)})
    start = time.monotonic()
    with pytest.raises(StorageError, match=f"reading {uri} failed after 3 attempts in .*: the store did not answer in time"):
        s3.read(uri)
    assert time.monotonic() - start < policy.longest()
    assert proxy.counts[Kind.GET] == 3
    proxy.set_rates({Kind.GET: Rates(delay=1.0, delay_seconds=0.1)})  # slow but within the timeout
    assert s3.read(uri) == b"late"


def test_a_missing_object_or_a_refused_request_is_not_retried(proxy: FaultProxy, bucket: str) -> None:
    s3 = storage(proxy)
    assert s3.head(f"s3://{bucket}/none") is None
    with pytest.raises(StorageError, match="NoSuchKey"):
        s3.read(f"s3://{bucket}/none")
    assert proxy.counts[Kind.HEAD] == 1 and proxy.counts[Kind.GET] == 1


def test_a_batch_delete_retries_only_the_keys_the_store_failed_for_now() -> None:
    """DeleteObjects answers 200 and lists keys it failed: transient codes are sent again, alone
    (botocore's Stubber stands in for a store that does this; moto never does); others are final."""
    from botocore.stub import Stubber

    s3 = S3Storage(S3Settings(endpoint="http://127.0.0.1:9", region="us-east-1"), FAST)
    with Stubber(s3.client) as stub:
        stub.add_response("delete_objects", {"Errors": [{"Key": "k2", "Code": "InternalError", "Message": "m"}]},
                          {"Bucket": "b", "Delete": {"Objects": [{"Key": "k1"}, {"Key": "k2"}], "Quiet": True}})
        stub.add_response("delete_objects", {},
                          {"Bucket": "b", "Delete": {"Objects": [{"Key": "k2"}], "Quiet": True}})
        s3.delete(["s3://b/k1", "s3://b/k2"])
        stub.assert_no_pending_responses()
        stub.add_response("delete_objects", {"Errors": [{"Key": "k3", "Code": "AccessDenied", "Message": "no"}]},
                          {"Bucket": "b", "Delete": {"Objects": [{"Key": "k3"}], "Quiet": True}})
        with pytest.raises(StorageError, match="deleting s3://b/k3 failed: AccessDenied no"):
            s3.delete(["s3://b/k3"])


def test_a_conditional_create_whose_sends_all_lose_their_answers_is_undecided_not_lost(
        proxy: FaultProxy, bucket: str) -> None:
    """Every send reset (none landed, but the client cannot know): after the policy's attempts, each
    resend preceded by a read-back, the outcome is WriteUndecided (nothing may be undone), not
    "another writer won"; the fault and the attempts are named."""
    from lading_jobs.storage import WriteUndecided

    uri = f"s3://{bucket}/_lading_manifest.json"
    s3 = storage(proxy)
    plan(proxy, Kind.PUT_CONDITIONAL, Fault.RESET_BEFORE, FAST.attempts)
    with pytest.raises(WriteUndecided) as caught:
        s3.put_if_absent(uri, b"{}")
    assert str(caught.value).startswith(f"writing {uri} (create if absent) failed (the connection was reset "
                                        f"(ConnectionClosedError), {FAST.attempts} attempts in ")
    assert "a lost attempt may still land" in str(caught.value)
    assert proxy.counts[Kind.PUT_CONDITIONAL] == FAST.attempts
    assert proxy.counts[Kind.HEAD] == FAST.attempts  # a read-back before each resend, and one at the end
    assert s3.put_if_absent(uri, b"{}") is True  # the store is healthy again: the create lands
