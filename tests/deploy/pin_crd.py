"""Pin a published CRD's schema for the launch tests: `python -m tests.deploy.pin_crd CRD.yaml SOURCE_URL OUT.json`.

Keeps the served version's openAPIV3Schema whole (the embedded Job and pod templates too, so the schema
checks them) and drops only the descriptions, which validate nothing; the source and version go with it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def pin(crd_path: Path, source: str) -> dict[str, Any]:
    crd = next(d for d in yaml.safe_load_all(crd_path.read_text()) if d and d.get("kind") == "CustomResourceDefinition")
    (version,) = [v for v in crd["spec"]["versions"] if v.get("served") and v.get("storage")]
    return {
        "source": source,
        "group": crd["spec"]["group"],
        "kind": crd["spec"]["names"]["kind"],
        "version": version["name"],
        "controller_gen": crd["metadata"].get("annotations", {}).get("controller-gen.kubebuilder.io/version"),
        "openAPIV3Schema": _strip(version["schema"]["openAPIV3Schema"]),
    }


if __name__ == "__main__":
    crd_file, url, out = sys.argv[1:4]
    Path(out).write_text(json.dumps(pin(Path(crd_file), url), sort_keys=True, separators=(",", ":")) + "\n")
