"""What a bin-pack's Spark tasks are shipped: the plan without its groups and each group on its own,
so a task decodes only its own group's parts (``compact.task.GroupTasks``). Before, every task
decoded the whole plan, every group's parts with their statistics (819 kB for 2,000 parts)."""

from __future__ import annotations

import pickle
import pickletools
from collections.abc import Callable
from dataclasses import replace

from pyspark import cloudpickle
from support.kv_tables import twelve_small_parts

from lading_jobs import storage as st
from lading_jobs.compact import plan as planner
from lading_jobs.compact import task as compact_task
from lading_jobs.table import writer


def names_in(data: bytes) -> set[str]:
    """The strings a pickle spells out itself (class and module names among them), not those
    inside the byte strings it carries."""
    return {arg for op, arg, _ in pickletools.genops(data) if isinstance(arg, str)}


def test_each_task_decodes_only_its_own_group(file_uri: Callable[[str], str]) -> None:
    uri = file_uri("t/")
    log = twelve_small_parts(uri)
    snap = log.snapshot()
    groups = tuple(planner.Group(snap.parts[i:i + 4]) for i in range(0, 12, 4))
    plan = compact_task.RewritePlan(replace(snap, parts=()), groups, 0, (), planner.WRITE_ID_PREFIX + "t", 1 << 20,
                                    st.S3Settings())
    storage = st.open_storage(uri)
    shipped: list[compact_task.Stage] = []

    def runner(stage: compact_task.Stage) -> list[str]:
        data = cloudpickle.dumps(stage)  # what Spark ships to every task of the stage
        assert "Part" not in names_in(data) and "Group" not in names_in(data), "parts outside their group's bytes"
        shipped.append(pickle.loads(data))
        return compact_task.in_process(storage)(shipped[-1])

    outcomes = compact_task.rewrite_groups(plan, runner)
    stage, = shipped
    assert stage.plan.groups == () and stage.count == 3
    body = stage.body
    assert isinstance(body, compact_task.GroupTasks) and body.plan.groups == ()
    assert [body.group(i) for i in range(3)] == list(groups)  # each task's group, whole
    assert [(o.group, o.rows_in, o.rows_out) for o in outcomes] == [(0, 20, 20), (1, 20, 20), (2, 20, 20)]
    writer.abort_parts(uri, [w for o in outcomes for w in o.written], storage=storage)
