"""One JSON envelope for every benchmark's result, so ``bench/report`` can chart them.

Each script in bench/ prints its figures for a reader and, at its end, hands the same figures
to :func:`write`, which wraps them in the conditions they were measured under:

    {"schema": 1, "script": "bench/unload.py", "variant": "", "command": "python bench/unload.py --rows 5000000",
     "date": "2026-12-02T05:40:00Z", "commit": "c6ccf50", "dirty": false,
     "load_average": {"start": [..1, 5, 15 min..], "end": [...]}, "cpu_count": 2,
     "machine": "Linux x86_64", "figures": {...the script's own...}}

The default path is ``bench/results/<script>.json``, or ``<script>-<variant>.json`` for a run of
one of a script's other modes (``--temporal``, ``--formats csv``, ``--s3``...: each mode's figures
are kept apart, so a run of one mode does not overwrite another's). ``--json-out PATH`` moves it,
``--json-out ''`` writes none (not ``--json``: bench/table_skipping.py has a ``--json`` mode). The
load average at the start is the one when this module was imported, which
every script does before its work. A transcribed result (figures copied from
docs/benchmarks-history.md, not measured by the script) has the same envelope plus ``source``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

SCHEMA = 1
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
_START_LOAD = list(os.getloadavg())


def default_path(script: str, variant: str = "") -> Path:
    """``bench/results/<script>.json`` for ``bench/<script>.py`` (``<script>-<variant>.json`` for a variant)."""
    return RESULTS / f"{Path(script).stem}{'-' + variant if variant else ''}.json"


def add_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--json-out PATH`` (default ``bench/results/<script>[-<variant>].json``; '' none) to a parser."""
    parser.add_argument("--json-out", default=None, metavar="PATH",
                        help="also write the result as JSON here (default: bench/results/<script>.json, "
                             "or <script>-<mode>.json for another mode; '' writes none)")


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def envelope(script: str, figures: dict[str, Any], variant: str = "",
             argv: list[str] | None = None) -> dict[str, Any]:
    """The figures with the conditions of this run: command, date, commit, load average, cores."""
    argv = sys.argv[1:] if argv is None else argv
    return {
        "schema": SCHEMA,
        "script": f"bench/{Path(script).name}",
        "variant": variant,
        "command": shlex.join(["python", f"bench/{Path(script).name}", *argv]),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": _git("rev-parse", "--short", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "load_average": {"start": _START_LOAD, "end": list(os.getloadavg())},
        "cpu_count": os.cpu_count(),
        "machine": f"{platform.system()} {platform.machine()}",
        "figures": figures,
    }


def write(path: str | None, script: str, figures: dict[str, Any], variant: str = "") -> None:
    """Write the figures of this run as JSON to ``path``, or to the default path of the script and
    ``variant`` (its mode) when ``path`` is None; nothing when ``path`` is ''."""
    if path == "":
        return
    out = Path(path) if path else default_path(script, variant)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(envelope(script, figures, variant), indent=1, default=float) + "\n")
    print(f"result written to {out}")
