"""kubectl's reading of YAML, observed through tools/crd-check (sigs.k8s.io/yaml, go-yaml v2).

A probe CRD whose every ``spec`` entry must equal "__never__" makes crd-check print
each entry's value as it converted it (``spec.a: Unsupported value: <JSON>``).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CRD_CHECK = next(p for p in (REPO / "shared/tools/crd-check", REPO.parent / "shared/tools/crd-check") if p.exists())
PROBE_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: probes.test.lading.io}
spec:
  group: test.lading.io
  scope: Namespaced
  names: {plural: probes, singular: probe, kind: Probe}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            additionalProperties:
              x-kubernetes-preserve-unknown-fields: true
              enum: ["__never__"]
"""

def crd_check_values(yaml_spec: str, tmp_path: Path) -> tuple[dict[str, Any], str]:
    """What crd-check made of each spec entry (JSON), and its whole output."""
    crd = tmp_path / "probe-crd.yaml"
    crd.write_text(PROBE_CRD)
    obj = tmp_path / "probe.yaml"
    obj.write_text("apiVersion: test.lading.io/v1\nkind: Probe\nmetadata: {name: p, namespace: default}\n"
                   f"spec:\n{yaml_spec}")
    out = subprocess.run([str(CRD_CHECK), "--crd", str(crd), str(obj)], capture_output=True, text=True,
                         timeout=60)
    values = {}
    for m in re.finditer(r"Probe \"p\": spec\.(\w+): Unsupported value: (.*): supported values: \"__never__\"",
                         out.stdout):
        values[m.group(1)] = json.loads(m.group(2))
    return values, out.stdout + out.stderr
