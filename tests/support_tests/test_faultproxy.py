"""The fault-injecting proxy (tests/support/faultproxy.py) against moto, with the real client."""

from __future__ import annotations

import uuid

import boto3
import botocore.config
import botocore.exceptions
import pytest
from support.faultproxy import Fault, FaultProxy, Kind, Rates, classify

pytestmark = pytest.mark.s3


def _client(url: str, attempts: int = 1):  # type: ignore[no-untyped-def]
    return boto3.client("s3", endpoint_url=url, region_name="us-east-1", config=botocore.config.Config(
        retries={"total_max_attempts": attempts, "mode": "standard"}, s3={"addressing_style": "path"}))


@pytest.mark.parametrize(("method", "path", "headers", "kind"), [
    ("GET", "/b/k", {}, Kind.GET),
    ("GET", "/b?list-type=2&prefix=x", {}, Kind.LIST),
    ("GET", "/b?uploads", {}, Kind.LIST),
    ("HEAD", "/b/k", {}, Kind.HEAD),
    ("PUT", "/b/k", {}, Kind.PUT),
    ("PUT", "/b/k", {"If-None-Match": "*"}, Kind.PUT_CONDITIONAL),
    ("PUT", "/b/k", {"If-Match": '"e"'}, Kind.PUT_CONDITIONAL),
    ("POST", "/b/k?uploads", {}, Kind.CREATE_MULTIPART),
    ("PUT", "/b/k?partNumber=1&uploadId=u", {}, Kind.UPLOAD_PART),
    ("POST", "/b/k?uploadId=u", {}, Kind.COMPLETE_MULTIPART),
    ("DELETE", "/b/k?uploadId=u", {}, Kind.ABORT_MULTIPART),
    ("DELETE", "/b/k", {}, Kind.DELETE),
    ("POST", "/b?delete", {}, Kind.DELETE),
    ("PUT", "/b", {}, Kind.OTHER),
])
def test_classify(method: str, path: str, headers: dict[str, str], kind: Kind) -> None:
    assert classify(method, path, headers) is kind


def test_forwards_and_counts(s3_endpoint: str, bucket: str) -> None:
    with FaultProxy(s3_endpoint) as proxy:
        c = _client(proxy.url)
        c.put_object(Bucket=bucket, Key="a", Body=b"hello")
        c.put_object(Bucket=bucket, Key="b", Body=b"x", IfNoneMatch="*")
        assert c.get_object(Bucket=bucket, Key="a")["Body"].read() == b"hello"
        assert c.head_object(Bucket=bucket, Key="a")["ContentLength"] == 5
        assert [o["Key"] for o in c.list_objects_v2(Bucket=bucket)["Contents"]] == ["a", "b"]
        up = c.create_multipart_upload(Bucket=bucket, Key="m")["UploadId"]
        etag = c.upload_part(Bucket=bucket, Key="m", UploadId=up, PartNumber=1, Body=b"part")["ETag"]
        c.complete_multipart_upload(Bucket=bucket, Key="m", UploadId=up,
                                    MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
        c.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "a"}]})
        assert dict(proxy.counts) == {Kind.PUT: 1, Kind.PUT_CONDITIONAL: 1, Kind.GET: 1, Kind.HEAD: 1,
                                      Kind.LIST: 1, Kind.CREATE_MULTIPART: 1, Kind.UPLOAD_PART: 1,
                                      Kind.COMPLETE_MULTIPART: 1, Kind.DELETE: 1}
        assert proxy.injected == []


def test_reset_after_lands_the_write_and_loses_the_answer(s3_endpoint: str, bucket: str, s3_client) -> None:  # type: ignore[no-untyped-def]
    with FaultProxy(s3_endpoint) as proxy:
        rule = proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER, match="/manifest")
        with pytest.raises(botocore.exceptions.ConnectionClosedError):
            _client(proxy.url).put_object(Bucket=bucket, Key="manifest", Body=b"ours", IfNoneMatch="*")
        assert rule.fired and rule.path.endswith("/manifest")
    assert s3_client.get_object(Bucket=bucket, Key="manifest")["Body"].read() == b"ours"


def test_reset_before_never_lands(s3_endpoint: str, bucket: str, s3_client) -> None:  # type: ignore[no-untyped-def]
    with FaultProxy(s3_endpoint) as proxy:
        proxy.plan(Kind.PUT, Fault.RESET_BEFORE)
        with pytest.raises(botocore.exceptions.ConnectionClosedError):
            _client(proxy.url).put_object(Bucket=bucket, Key="k", Body=b"x")
    assert s3_client.list_objects_v2(Bucket=bucket).get("Contents") is None


def test_botocore_retries_a_reset_put_and_gets_412(s3_endpoint: str, bucket: str) -> None:
    """What the issue saw: the client's own retry of a landed conditional PUT answers 412."""
    with FaultProxy(s3_endpoint) as proxy:
        proxy.plan(Kind.PUT_CONDITIONAL, Fault.RESET_AFTER)
        with pytest.raises(botocore.exceptions.ClientError) as e:
            _client(proxy.url, attempts=3).put_object(Bucket=bucket, Key="k", Body=b"x", IfNoneMatch="*")
        assert e.value.response["Error"]["Code"] == "PreconditionFailed"
        assert proxy.counts[Kind.PUT_CONDITIONAL] == 2


def test_error_answers_and_truncated_bodies(s3_endpoint: str, bucket: str, s3_client) -> None:  # type: ignore[no-untyped-def]
    s3_client.put_object(Bucket=bucket, Key="big", Body=b"z" * 10000)
    with FaultProxy(s3_endpoint) as proxy:
        c = _client(proxy.url)
        proxy.plan(Kind.GET, Fault.ERROR_5XX)
        with pytest.raises(botocore.exceptions.ClientError) as e:
            c.get_object(Bucket=bucket, Key="big")
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] in (500, 503)
        proxy.plan(Kind.HEAD, Fault.SLOWDOWN)
        with pytest.raises(botocore.exceptions.ClientError) as e:
            c.head_object(Bucket=bucket, Key="big")
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429
        proxy.plan(Kind.GET, Fault.TRUNCATE)
        body = c.get_object(Bucket=bucket, Key="big")["Body"]
        with pytest.raises(botocore.exceptions.ResponseStreamingError):
            body.read()
        proxy.plan(Kind.GET, Fault.DELAY)
        assert c.get_object(Bucket=bucket, Key="big")["Body"].read() == b"z" * 10000


def test_seeded_rates_are_reproducible(s3_endpoint: str, bucket: str, s3_client) -> None:  # type: ignore[no-untyped-def]
    def run(seed: int) -> list[int]:
        faulted = []
        with FaultProxy(s3_endpoint, seed=seed, rates={Kind.HEAD: Rates(error_5xx=0.3)}) as proxy:
            c = _client(proxy.url)
            for i in range(30):
                try:
                    c.head_object(Bucket=bucket, Key="nothing")
                except botocore.exceptions.ClientError as e:
                    if e.response["ResponseMetadata"]["HTTPStatusCode"] >= 500:
                        faulted.append(i)
            assert proxy.counts[Kind.HEAD] == 30
        return faulted

    first = run(3)
    assert first == run(3) and 3 <= len(first) <= 18
    assert first != run(4)


def test_stop_closes_idle_keepalive_connections(s3_endpoint: str, bucket: str) -> None:
    proxy = FaultProxy(s3_endpoint, timeout=5).start()
    c = _client(proxy.url)
    c.put_object(Bucket=bucket, Key=uuid.uuid4().hex, Body=b"x")  # leaves a pooled connection open
    proxy.stop()
    assert not proxy._server._workers
