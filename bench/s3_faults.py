"""S3 requests per run under faults on the wire, against the same run fault-free (issue 46: no retry storm).

  python bench/s3_faults.py [--rate 0.2] [--seeds 3] [--rows 2000]

Starts moto's S3 server on 127.0.0.1 with the fault-injecting proxy in front
(tests/support/faultproxy.py), and a local Spark session; runs an unload (CSV, a
``replace`` export of ``--rows`` rows) and a load (four CSV files into a table)
once fault-free and once per seed with every fault kind mixed at ``--rate`` of
every request (5xx, 429, delays, resets before and after the request landed,
truncated bodies). The spec's ``connection.endpoint`` is the proxy, so
the driver and the Spark tasks both go through it. Counts every request the proxy
sees, faulted ones included, and prints per job: requests fault-free, under faults
(each seed), the ratio, and the bound the retry policy states
(``lading_jobs.retry``): each call at most ``Policy.attempts`` requests, so at
most that many times the fault-free count, plus one listing and its aborts per
CreateMultipartUpload whose answer may have been lost, and the read-backs of a
conditional write or completion whose answer was lost; about ``1 / (1 − rate)``
expected. Counts, not times: fine on a busy machine. Record the output in
docs/benchmarks.md ("Faults on the wire").
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import benchjson

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "spark_apps"), str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1",
                   "AWS_DEFAULT_REGION": "us-east-1"})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rate", type=float, default=0.2, help="each request's chance of a fault (mixed kinds)")
    p.add_argument("--seeds", type=int, default=3, help="faulted runs per job, one seed each")
    p.add_argument("--rows", type=int, default=2000)
    benchjson.add_argument(p)
    args = p.parse_args()

    import boto3
    import pyarrow as pa
    import pyarrow.parquet as pq
    from moto.server import ThreadedMotoServer
    from support.faultproxy import FaultProxy, Rates
    from support.moto_atomic import make_conditional_writes_atomic

    from lading_jobs import retry
    from lading_jobs.load.job import run_load
    from lading_jobs.main import execute
    from lading_jobs.result import Cancellation
    from lading_jobs.session import build_session
    from lading_spec.job import JobDocument

    make_conditional_writes_atomic()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    upstream = f"http://{host}:{port}"
    s3 = boto3.client("s3", endpoint_url=upstream, region_name="us-east-1")
    spark = build_session(master="local[2]", app_name="bench-s3-faults")
    scratch = Path(tempfile.mkdtemp(prefix="bench-s3-faults-"))
    ids = pa.array(range(args.rows), pa.int64())
    pq.write_table(pa.table({"id": ids, "note": [f"row {i}" for i in range(args.rows)]}), scratch / "src.parquet")
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    faults = Rates.mixed(args.rate, delay_seconds=0.02)

    def fresh_bucket() -> str:
        name = f"bench-{uuid.uuid4().hex[:10]}"
        s3.create_bucket(Bucket=name)
        return name

    def unload(endpoint: str) -> dict[str, Any]:
        bucket = fresh_bucket()
        spec = {"from": {"query": "SELECT id, note, id % 8 AS p FROM bench_src",
                         "inputs": [{"name": "bench_src", "files": f"file://{scratch}/", "format": "parquet"}]},
                "to": {"files": f"s3://{bucket}/out/", "format": "csv", "ifExists": "replace", "partitionBy": ["p"]},
                "connection": {"endpoint": endpoint}}
        doc = JobDocument("CopyJob", "bench", "unload", "u", 1, f"run-{uuid.uuid4().hex[:8]}", when, spec)
        return execute(doc, lambda: spark, Cancellation())

    def load(endpoint: str) -> dict[str, Any]:
        bucket = fresh_bucket()
        for f in range(4):
            body = "id,name\n" + "".join(f"{f * args.rows + i},n{i}\n" for i in range(args.rows // 4))
            s3.put_object(Bucket=bucket, Key=f"in/f{f}.csv", Body=body.encode())
        spec = {"from": {"files": f"s3://{bucket}/in/", "format": "csv", "options": {"header": True}},
                "to": {"table": f"s3://{bucket}/t/", "schema": [{"name": "id", "type": "bigint"},
                                                                 {"name": "name", "type": "string"}]},
                "connection": {"endpoint": endpoint}}
        return run_load(spark, JobDocument("CopyJob", "bench", "load", "u", 1, f"run-{uuid.uuid4().hex[:8]}",
                                           when, spec))

    def count(job: Callable[[str], dict[str, Any]], rates: Any, seed: int) -> tuple[int, int, dict[str, Any]]:
        with FaultProxy(upstream, seed=seed, rates=rates) as proxy:
            result = job(proxy.url)
            return proxy.total(), len(proxy.injected), result

    policy = retry.DEFAULT
    print(f"fault rate {args.rate:.0%} per request, every kind mixed; policy: {policy.attempts} attempts, "
          f"{policy.deadline:.0f} s deadline, backoff base {policy.base} s cap {policy.cap} s (full jitter)")
    jobs: list[dict[str, Any]] = []  # for the JSON (bench/benchjson.py)
    for name, job in (("unload", unload), ("load", load)):
        count(job, None, 0)  # warm-up (first Spark jobs of the session), not counted
        clean, _, result = count(job, None, 0)
        assert "error" not in result, result
        faulted = []
        injections: list[tuple[int, str]] = []
        for seed in range(1, args.seeds + 1):
            n, injected, result = count(job, faults, seed)
            status = "ok" if "error" not in result else f"FAILED: {result['error'][:160]}"
            faulted.append(n)
            injections.append((injected, status))
            print(f"  {name} seed {seed}: {n} requests, {injected} faults injected, {status}")
        worst = max(faulted)
        print(f"{name}: fault-free {clean} requests; under faults {faulted} (max {worst}); "
              f"ratio {worst / clean:.2f} (mean {sum(faulted) / len(faulted) / clean:.2f}); "
              f"expected ≈ {1 / (1 - args.rate):.2f}; bound ≤ {policy.attempts}× per call "
              f"= {policy.attempts * clean} requests (+ read-backs after lost answers)")
        jobs.append({"job": name, "fault_free": clean, "faulted": faulted,
                     "injected": [i for i, _ in injections], "status": [s for _, s in injections],
                     "worst_ratio": worst / clean, "mean_ratio": sum(faulted) / len(faulted) / clean,
                     "bound": policy.attempts * clean})
    benchjson.write(args.json_out, __file__, {"rate": args.rate, "seeds": args.seeds, "rows": args.rows,
                                          "attempts": policy.attempts, "jobs": jobs})
    spark.stop()
    server.stop()


if __name__ == "__main__":
    main()
