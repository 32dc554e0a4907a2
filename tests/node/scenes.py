"""The node tier's jobs run side by side: each case is a *scenario* that does what a user or a
fault does and records what it saw; the tests only assert on those records.

A Spark job on the node spends much of its time waiting (spark-submit's JVM, a pod's start, the
executor registering, a grace period, a deadline), so the tier starts every selected scenario at
once, in a bounded pool, instead of one module after another, and the node's two CPUs stay busy.

- :func:`scenario` registers a function ``(Scene, Seen) -> None`` under a name; ``own_namespace``
  gives it a job namespace of its own (for a case that changes the namespace: a ResourceQuota, the
  Spark Role), the others share the release's main job namespace;
- a test says which scenario it reads with ``@pytest.mark.scene("name")``: the session's
  :class:`Stage` (tests/node/conftest.py, fixture ``stage``) starts exactly the scenarios the
  selected tests name, the longest chains first (``priority``), and :meth:`Stage.outcome` waits for
  one and raises what it raised.

Imported as ``node.scenes``, like ``node.jobs``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from node.jobs import Published, s3_setup

from harness.client import KubeClient


@dataclass
class Scene:
    """Where a scenario runs: the cluster, its job namespace (served by the chart's release), S3 on
    moto, a kubeconfig for kubectl, the release's namespace, and Kafka on the bridge on demand."""

    client: KubeClient
    namespace: str
    endpoint: str
    kubeconfig: str
    release_namespace: str
    release_name: str
    kafka: Callable[[], str]


@dataclass
class Seen:
    """What a scenario did and saw (``seconds``: from its start to its last look)."""

    bucket: str
    s3: Any
    apps: list[str] = field(default_factory=list)
    victim: str = ""
    status: dict[str, Any] = field(default_factory=dict)
    executors: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    driver_log: str = ""
    facts: dict[str, Any] = field(default_factory=dict)
    out: Published | None = None
    seconds: float = 0.0
    began: float = 0.0

    def pending(self) -> list[str]:
        return [u["Key"] for u in self.s3.list_multipart_uploads(Bucket=self.bucket).get("Uploads", [])]


ScenarioFn = Callable[[Scene, Seen], None]


@dataclass(frozen=True)
class Scenario:
    name: str
    run: ScenarioFn
    own_namespace: bool
    priority: int


REGISTRY: dict[str, Scenario] = {}


def scenario(name: str, *, own_namespace: bool = False, priority: int = 0) -> Callable[[ScenarioFn], ScenarioFn]:
    """Register ``run`` as scenario ``name`` (higher ``priority`` starts first)."""

    def register(run: ScenarioFn) -> ScenarioFn:
        assert name not in REGISTRY or REGISTRY[name].run.__qualname__ == run.__qualname__, f"two scenarios {name!r}"
        REGISTRY[name] = Scenario(name, run, own_namespace, priority)
        return run

    return register


class Stage:
    """The selected scenarios, started together in a pool of ``workers`` threads."""

    def __init__(self, names: list[str], make_scene: Callable[[Scenario], Scene], workers: int) -> None:
        unknown = sorted(set(names) - set(REGISTRY))
        assert not unknown, f"tests name scenarios nobody registered: {unknown}"
        self.scenarios = sorted((REGISTRY[n] for n in set(names)), key=lambda s: (-s.priority, s.name))
        self._make_scene = make_scene
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="scene")
        self._runs: dict[str, tuple[Future[None], Seen]] = {}
        self.began = time.monotonic()

    def start(self) -> None:
        for chosen in self.scenarios:
            scene = self._make_scene(chosen)
            s3, bucket = s3_setup(scene.client, scene.namespace, scene.endpoint)  # one at a time: the Secret once
            seen = Seen(bucket, s3)
            self._runs[chosen.name] = (self._pool.submit(self._timed, chosen.run, scene, seen), seen)

    @staticmethod
    def _timed(run: ScenarioFn, scene: Scene, seen: Seen) -> None:
        seen.began = time.monotonic()
        try:
            run(scene, seen)
        finally:
            seen.seconds = time.monotonic() - seen.began

    def outcome(self, name: str, timeout: float = 1700) -> Seen:
        """Scenario ``name``'s record once it ended; its own failure (a wait that timed out, a
        refused request) is raised here, in the test that reads it."""
        assert name in self._runs, f"scenario {name!r} was not started: mark the test @pytest.mark.scene({name!r})"
        future, seen = self._runs[name]
        future.result(timeout=timeout)
        print(f"scenario {name}: {seen.seconds:.1f} s, started {seen.began - self.began:.1f} s after the stage")
        return seen

    def close(self) -> Iterator[str]:
        """Wait for every scenario; yields the names of those that failed (already reported)."""
        self._pool.shutdown(wait=True)
        for name, (future, _) in self._runs.items():
            if future.exception() is not None:
                yield name
