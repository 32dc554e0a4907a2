"""Lost answers at the storage layer, through the fault-injecting proxy with the real client: a
conditional create or a multipart completion whose answer is lost after it landed is recognised as
this call's own (issue 46)."""

from __future__ import annotations

import pytest
from support.faultproxy import Fault, FaultProxy, Kind
from support.moto_atomic import completed_uploads_forgotten

from lading_jobs import retry
from lading_jobs.storage import S3Settings, S3Storage, WriteUndecided, multipart_etag, undecided

pytestmark = pytest.mark.s3


def _storage(proxy: FaultProxy) -> S3Storage:
    return S3Storage(S3Settings(endpoint=proxy.url, region="us-east-1"))


def test_put_if_absent_recognises_its_own_landed_write(fault_proxy: FaultProxy, bucket: str) -> None:
    """The retry policy resends the PUT after the reset, reading back first: the first attempt landed."""
    storage = _storage(fault_proxy)
    uri = f"s3://{bucket}/k.json"
    rule = fault_proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER)
    assert storage.put_if_absent(uri, b'{"attempt":"a1"}') is True
    assert rule.fired
    assert storage.read(uri) == b'{"attempt":"a1"}'
    assert storage.put_if_absent(uri, b'{"attempt":"a2"}') is False  # another writer's: refused


def test_put_if_absent_after_a_lost_answer_to_another_writers_key(fault_proxy: FaultProxy, bucket: str) -> None:
    storage = _storage(fault_proxy)
    uri = f"s3://{bucket}/k.json"
    storage.put_if_absent(uri, b"theirs")
    fault_proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER)
    assert storage.put_if_absent(uri, b"ours..") is False  # same size, other bytes


def test_put_if_absent_resends_when_nothing_landed(fault_proxy: FaultProxy, bucket: str) -> None:
    storage = _storage(fault_proxy)
    uri = f"s3://{bucket}/k.json"
    for _ in range(retry.DEFAULT.attempts - 1):  # every send but the policy's last is reset before it lands
        fault_proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_BEFORE)
    assert storage.put_if_absent(uri, b"x") is True
    assert storage.read(uri) == b"x"


def test_put_if_absent_undecided_when_it_cannot_read_back(fault_proxy: FaultProxy, bucket: str) -> None:
    storage = _storage(fault_proxy)
    uri = f"s3://{bucket}/k.json"
    fault_proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER)
    for _ in range(6):
        fault_proxy.plan(Kind.HEAD, Fault.RESET_BEFORE)
    with pytest.raises(WriteUndecided, match="reading it back"):
        storage.put_if_absent(uri, b"x")


def test_complete_upload_recognises_its_own_landed_completion(fault_proxy: FaultProxy, bucket: str) -> None:
    storage = _storage(fault_proxy)
    uri = f"s3://{bucket}/part-0.bin"
    upload = storage.begin_upload(uri)
    storage.upload_part(upload, b"a" * (5 * 1024 * 1024))
    storage.upload_part(upload, b"tail")
    rule = fault_proxy.plan(Kind.COMPLETE_MULTIPART, Fault.RESET_AFTER)
    with completed_uploads_forgotten():
        storage.complete_upload(upload)  # the resend finds NoSuchUpload: the object is the upload's
    assert rule.fired
    info = storage.head(uri)
    assert info is not None and info.size == 5 * 1024 * 1024 + 4
    assert info.etag == multipart_etag(upload.parts)


def test_complete_upload_of_an_aborted_upload_still_fails(fault_proxy: FaultProxy, bucket: str) -> None:
    storage = _storage(fault_proxy)
    upload = storage.begin_upload(f"s3://{bucket}/gone.bin")
    storage.upload_part(upload, b"x")
    storage.abort_upload(upload)
    with pytest.raises(Exception, match="is gone"):
        storage.complete_upload(upload)


def test_undecided_tells_lost_answers_from_refusals() -> None:
    import botocore.exceptions

    def client_error(status: int) -> botocore.exceptions.ClientError:
        return botocore.exceptions.ClientError(
            {"Error": {"Code": "X"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")

    assert undecided(client_error(503)) and undecided(client_error(429))
    assert not undecided(client_error(403))
    assert undecided(botocore.exceptions.ConnectionClosedError(endpoint_url="http://x"))
    assert not undecided(botocore.exceptions.EndpointConnectionError(endpoint_url="http://x"))
    try:
        try:
            raise client_error(500)
        except botocore.exceptions.ClientError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as wrapped:
        assert undecided(wrapped)


def test_a_retried_delete_of_a_shared_intent_leaves_another_runs(fault_proxy: FaultProxy, bucket: str, s3_endpoint: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The delete of an intent (one key for every run of an ``error``/``replace`` destination) lands and its
    answer is lost; before the retry, another run takes the key. The blind retry deleted that run's intent,
    and a third run then published beside it (found in review): the retry deletes only our own bytes."""
    storage = _storage(fault_proxy)
    direct = S3Storage(S3Settings(endpoint=s3_endpoint, region="us-east-1"))
    uri = f"s3://{bucket}/out/_lading_intent.json"
    storage.put(uri, b'{"attempt":"ours"}')
    backoffs: list[float] = []

    def meanwhile(seconds: float) -> None:  # the retry's wait: the other run begins its publish
        backoffs.append(seconds)
        assert direct.put_if_absent(uri, b'{"attempt":"theirs"}') is True  # our delete had landed

    monkeypatch.setitem(retry.call.__kwdefaults__, "sleep", meanwhile)
    rule = fault_proxy.plan(Kind.DELETE, Fault.RESET_AFTER)
    storage.delete_if_holds(uri, b'{"attempt":"ours"}')
    assert rule.fired and len(backoffs) == 1
    assert direct.read(uri) == b'{"attempt":"theirs"}'
    # with nobody in between, the retry finds the key gone and is done
    direct.delete([uri])
    storage.put(uri, b'{"attempt":"ours"}')
    monkeypatch.setitem(retry.call.__kwdefaults__, "sleep", lambda seconds: None)
    fault_proxy.plan(Kind.DELETE, Fault.RESET_AFTER)
    storage.delete_if_holds(uri, b'{"attempt":"ours"}')
    assert direct.head(uri) is None
    # and a delete that never landed is sent again
    storage.put(uri, b'{"attempt":"ours"}')
    fault_proxy.plan(Kind.DELETE, Fault.RESET_BEFORE)
    storage.delete_if_holds(uri, b'{"attempt":"ours"}')
    assert direct.head(uri) is None


def test_delete_if_holds_undecided_when_it_cannot_read_back(fault_proxy: FaultProxy, bucket: str, s3_endpoint: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The delete's answer is lost and the read-back fails too: undecided, and the message speaks of the
    delete (it used to speak of a write), and the key is left as it is."""
    storage = _storage(fault_proxy)
    uri = f"s3://{bucket}/out/_lading_intent.json"
    storage.put(uri, b'{"attempt":"ours"}')
    monkeypatch.setitem(retry.call.__kwdefaults__, "sleep", lambda seconds: None)
    fault_proxy.plan(Kind.DELETE, Fault.RESET_BEFORE)
    for _ in range(retry.DEFAULT.attempts):  # every HEAD of the read-back's retries
        fault_proxy.plan(Kind.HEAD, Fault.RESET_BEFORE)
    with pytest.raises(WriteUndecided, match=r"^deleting s3://.*_lading_intent\.json got no clear answer .*reading it back"):
        storage.delete_if_holds(uri, b'{"attempt":"ours"}')
    assert S3Storage(S3Settings(endpoint=s3_endpoint, region="us-east-1")).read(uri) == b'{"attempt":"ours"}'
