"""A CopyJob on a real node: the chart installed with helm, the operator as its Deployment,
spark-operator's submission (the stand-in's ``k8s`` mode), the driver and executors as pods.

The answer is read from the resource's status and the data itself: the rows an unload of a
query over a lading table wrote to S3 (moto on the node's bridge address) are read back. Both
cases are scenarios of the tier's stage (tests/node/scenes.py): they run beside the others.
"""

from __future__ import annotations

import pytest
from node.jobs import (
    PodsSeen,
    copy_spec,
    create,
    published,
    slow_query,
    spark_pods,
    wait_phase,
    wait_running,
    wait_until_true,
)
from node.scenes import Scene, Seen, Stage, scenario
from support import kv_tables

from harness.node import pod_log

pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]

EXPECTED = [(k, f"c{k // 10}") for k in range(0, 60, 2)]  # what twelve_small_parts wrote, k even


@scenario("unload", priority=1)
def unload_of_a_query_over_a_table(scene: Scene, seen: Seen) -> None:
    client, ns = scene.client, scene.namespace
    table = f"s3://{seen.bucket}/tables/kv/"
    kv_tables.twelve_small_parts(table)  # 60 rows, k = 0..59, 12 parts
    spec = copy_spec({"query": "SELECT k, v FROM kv WHERE k % 2 = 0", "inputs": [{"name": "kv", "table": table}]},
                     f"s3://{seen.bucket}/out/", scene.endpoint)
    create(client, ns, "CopyJob", "unload", spec)
    app = wait_running(client, ns, "CopyJob", "unload")  # named before spark-submit creates its driver
    seen.apps.append(app)
    with PodsSeen(client, ns, app) as pods:
        seen.status = wait_phase(client, ns, "CopyJob", "unload")["status"]
        # the driver has exited (its application's end is what ended the run): its log is whole
        seen.driver_log = "".join(pod_log(client, ns, p["metadata"]["name"], lines=100_000)
                                  for p in spark_pods(client, ns, "driver", app))
        # the driver stops its executors when the job ends
        wait_until_true(lambda: not spark_pods(client, ns, "executor", app), 90, "executor pods still there after the job")
    seen.roles = pods.roles()
    seen.out = published(seen.s3, seen.bucket, "out/")
    # deleting the CopyJob takes its SparkApplication and driver pod with it
    client.delete("lading.io/v1alpha1", "copyjobs", ns, "unload")
    wait_until_true(lambda: not spark_pods(client, ns, "driver", app), 120, "the driver pod outlived its CopyJob")


@pytest.mark.scene("unload")
def test_unload_of_a_query_over_a_table_runs_as_driver_and_executor_pods(stage: Stage) -> None:
    seen = stage.outcome("unload")
    status = seen.status
    assert status["phase"] == "Succeeded", status
    assert status["response"]["rows"] == len(EXPECTED)
    assert "driver" in seen.roles and "executor" in seen.roles, seen.roles
    # the chart's Spark Role grants no PersistentVolumeClaims by default, and the rendered
    # application keeps the driver from asking for them (render.PVC_DEFAULTS): Spark's defaults
    # listed them before requesting executors and deleted them at stop, both refused
    assert "Registering BlockManager" in seen.driver_log or "SparkContext" in seen.driver_log, seen.driver_log[-2000:]
    asked = [line for line in seen.driver_log.splitlines()
             if "persistentvolumeclaims" in line.lower() or "Cannot list PVC" in line]
    assert not asked, asked
    # the files read back equal the query's answer
    out = seen.out
    assert out is not None and out.rows is not None and len(out.manifests) == 1
    assert status["output"]["manifest"].endswith("out/_lading_manifest.json")
    assert sorted(zip(out.rows.column("k").to_pylist(), out.rows.column("v").to_pylist(), strict=True)) == EXPECTED


@scenario("cancel")
def cancel_mid_run(scene: Scene, seen: Seen) -> None:
    client, ns = scene.client, scene.namespace
    create(client, ns, "CopyJob", "to-cancel", copy_spec({"query": slow_query(100_000)},
                                                         f"s3://{seen.bucket}/cancelled/", scene.endpoint))
    app = wait_running(client, ns, "CopyJob", "to-cancel")
    seen.apps.append(app)
    # mid-run: its executor pod is running
    wait_until_true(lambda: any((p.get("status") or {}).get("phase") == "Running"
                                for p in spark_pods(client, ns, "executor", app)), 600, "no executor pod running")
    client.patch("lading.io/v1alpha1", "copyjobs", ns, "to-cancel", {"spec": {"cancel": True}})
    seen.status = wait_phase(client, ns, "CopyJob", "to-cancel", timeout=120)["status"]
    # the driver pod goes with its SparkApplication, the executors with the driver
    wait_until_true(lambda: not spark_pods(client, ns, "driver", app) and not spark_pods(client, ns, "executor", app),
                    120, "Spark pods outlived the cancelled run")
    seen.out = published(seen.s3, seen.bucket, "")


@pytest.mark.scene("cancel")
def test_cancel_mid_run_removes_the_driver_and_executors_and_leaves_nothing(stage: Stage) -> None:
    seen = stage.outcome("cancel")
    assert seen.status["phase"] == "Cancelled", seen.status
    assert seen.out is not None and seen.out.keys == []
    assert seen.pending() == []
