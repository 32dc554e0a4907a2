"""``lading render FILE.yaml``: print the SparkApplication(s) the operator would create.

A dry run users can diff in GitOps: each resource in the file whose kind has an
engine in this release is validated exactly as the operator validates it and
rendered by the same pure function. A scheduled resource renders the run of its
next slot (``--run-time`` picks another); the ``uid`` is left empty because only
the API server assigns it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from lading_operator import kinds, names, policy, reconcile, render, schedule
from lading_operator import status as st
from lading_operator.observed import PolicyCheck
from lading_spec import manifests
from lading_spec.errors import SpecError
from lading_spec.job import API_VERSION

DESCRIPTION = """\
Prints the SparkApplication the operator would create for each resource in
FILE (CopyJob, StreamCopy, Compaction): a dry run to diff in
GitOps. Each resource is validated as the operator validates it (with --policy,
against that policy file too) and rendered by the same code; a scheduled one
renders the run of its next slot (--run-time picks another). The file is read
as kubectl reads it. Exit code 0: rendered; 1: FILE holds nothing to render;
2: a resource is invalid or forbidden, or FILE cannot be read.
"""


# Strings that some YAML reader takes for a number: PyYAML follows YAML 1.1 and leaves
# ``07460811`` (not octal there), ``1_000`` or ``0o17`` plain, but Go's YAML (kubectl, Flux,
# Argo CD) reads them as numbers, and a label value that is a number is refused.
_NUMBER_LIKE = re.compile(r"[-+]?(\.?[0-9]|\.(inf|Inf|INF|nan|NaN|NAN)\Z)")


class _PlainDumper(yaml.SafeDumper):
    """Writes every value out in full: no ``&id001`` anchors, which GitOps diffs would show;
    a string that any YAML reader could take for a number is quoted."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _string(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "'" if _NUMBER_LIKE.match(data) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_PlainDumper.add_representer(str, _string)


def _run_time(text: str | None) -> dt.datetime:
    if not text:
        return dt.datetime.now(dt.UTC).replace(microsecond=0)
    value = st.parse_time(text)
    if value is None:
        raise SpecError("--run-time", f"expected an RFC 3339 time such as 2026-01-01T02:00:00Z, got {text!r}")
    return value


def _policy_check(loaded: policy.Policy) -> PolicyCheck:
    """The operator's policy check with ``loaded`` (the file's, else the default policy)."""
    install = render.installation_from_env()  # the image and account the rendering uses

    def check(namespace: str, uris: list[tuple[str, str]], spark: Any) -> str | None:
        return policy.check_resource(loaded, namespace, uris, spark, install.image, install.service_account)

    return check


def render_document(doc: dict[str, Any], namespace: str, run_time: dt.datetime,
                    kind: kinds.Kind = kinds.COPYJOB, policy_file: str | None = None) -> dict[str, Any]:
    """The SparkApplication for one manifest of ``kind`` (raises SpecError naming the field).

    ``policy_file``: check it as the operator would with that ``LADING_POLICY_FILE``."""
    meta = doc.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise SpecError("metadata.name", "missing")
    spec = doc.get("spec") or {}
    ns = str(meta.get("namespace") or namespace)
    loaded = policy.load_policy(policy_file)
    invalid = reconcile.validate(kind, spec, ns, _policy_check(loaded), run_time)
    if invalid is not None:
        field, _, message = invalid[1].partition(":")
        raise SpecError(field.removeprefix("spec."), message.strip())
    uid = str(meta.get("uid") or "")
    generation = int(meta.get("generation") or 1)
    if spec.get("schedule"):
        slot = schedule.parse_schedule(spec["schedule"], run_time).next_after(run_time - dt.timedelta(seconds=1))
        run_id, when = schedule.slot_run_id(slot, schedule.run_owner(uid, kind.name, ns, name)), slot
    else:
        run_id, when = names.oneshot_run_id(f"{uid or name}/{generation}", name), run_time
    run = render.RunIdentity(kind=kind.name, namespace=ns, name=name, uid=uid, generation=generation,
                             run_id=run_id, run_time=when)
    return render.build_sparkapplication(spec, run, operator_fields=kind.operator_fields,
                                         continuous=kind.trigger == "continuous",
                                         file_prefixes=loaded.file_prefixes_for(ns),
                                         catalogs=loaded.catalogs_env(ns))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lading render", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", help="a YAML file with one or more lading resources ('-' = stdin)")
    parser.add_argument("--namespace", "-n", default="default", help="namespace for resources without one")
    parser.add_argument("--run-time", help="the run time to render (RFC 3339; default: now)")
    parser.add_argument("--policy", metavar="FILE", default=None,
                        help="check the resources against this policy file, as the operator does with "
                             "LADING_POLICY_FILE (default: no policy file, as the operator without one: s3:// "
                             "only, the operator's image and ServiceAccount, a small job's size; Spark "
                             "properties must be safe tuning)")
    args = parser.parse_args(argv)
    try:
        policy.load_policy(args.policy)
    except policy.PolicyError as e:
        print(f"lading render: --policy: {e}", file=sys.stderr)
        return 2
    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file).read()  # noqa: SIM115
        docs = manifests.load_all(text)  # as kubectl reads it: keys are strings, y/on are true ...
    except OSError as e:
        print(f"lading render: cannot read {args.file}: {e}", file=sys.stderr)
        return 2
    except SpecError as e:
        print(f"lading render: {args.file}: {e.message}", file=sys.stderr)
        return 2
    out = []
    status = 0
    others = 0
    for i, doc in enumerate(docs):
        where = f"{args.file}: document {i + 1}"
        if not isinstance(doc, dict) or doc.get("apiVersion") != API_VERSION:
            continue
        kind = kinds.BY_NAME.get(str(doc.get("kind")))
        if kind is None:
            continue
        if not kind.engine_available:
            print(f"# {where}: {kind.name} {doc.get('metadata', {}).get('name')}: no SparkApplication "
                  "(its engine ships in a later release)", file=sys.stderr)
            others += 1
            continue
        try:
            out.append(render_document(doc, args.namespace, _run_time(args.run_time), kind, args.policy))
        except SpecError as e:
            print(f"lading render: {where}: spec.{e.field}: {e.message}"
                  if not e.field.startswith(("-", "metadata")) else f"lading render: {where}: {e}", file=sys.stderr)
            status = 2
    if out:
        sys.stdout.write(yaml.dump_all(out, Dumper=_PlainDumper, sort_keys=False, width=120))
    elif status == 0 and not others:
        print(f"lading render: {args.file} holds no lading.io/v1alpha1 resource to render", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
