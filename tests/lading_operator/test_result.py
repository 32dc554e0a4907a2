"""Reading the job's result from the driver pod's termination message."""

from __future__ import annotations

from lading_operator import result


def pod(message: str | None, name: str = "spark-kubernetes-driver", exit_code: int = 0) -> dict:  # type: ignore[type-arg]
    terminated = {"exitCode": exit_code, **({"message": message} if message is not None else {})}
    return {"status": {"containerStatuses": [
        {"name": "sidecar", "state": {"terminated": {"exitCode": 0, "message": "not ours"}}},
        {"name": name, "state": {"terminated": terminated}},
    ]}}


def test_driver_container_message_is_read_first() -> None:
    assert result.read_result(pod('{"rows": 7, "files": 1}')) == {"rows": 7, "files": 1}


def test_error_result_and_marker_line() -> None:
    text = 'some log\nLADING_RESULT {"error": "[TABLE_OR_VIEW_NOT_FOUND] nope", "runId": "r"}'
    assert result.read_result(pod(text, exit_code=1))["error"].startswith("[TABLE_OR_VIEW_NOT_FOUND]")
    assert result.exit_code(pod(text, exit_code=1)) == 1


def test_absent_or_unparseable() -> None:
    assert result.read_result(None) is None
    assert result.read_result({"status": {}}) is None
    assert result.read_result(pod("Error: OOMKilled", name="other")) is None


def test_driver_pod_name() -> None:
    assert result.driver_pod_name({"metadata": {"name": "a-1"}, "status": {"driverInfo": {"podName": "x"}}}) == "x"
    assert result.driver_pod_name({"metadata": {"name": "a-1"}}) == "a-1-driver"
