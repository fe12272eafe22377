"""Helpers the JSON-contract and golden tests share."""

from __future__ import annotations

import json
import os
from pathlib import Path

# fields that change with the checkout, not with the model
VOLATILE = ("sha256", "file", "task_file", "topology_file", "task_sha256", "topology_sha256",
            "pkbsim_version")


def get(data: dict, dotted: str) -> object:
    """``data["a"]["b"]`` for ``"a.b"``, failing with the missing path."""
    node: object = data
    for part in dotted.split("."):
        assert isinstance(node, dict) and part in node, f"missing {dotted}"
        node = node[part]
    return node


def strip(value: object) -> object:
    """A JSON value without its VOLATILE fields."""
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def check_golden(got: object, path: Path) -> None:
    """Compare with the golden file field by field (PKBSIM_UPDATE_GOLDEN=1 rewrites it)."""
    got = strip(got)
    if os.environ.get("PKBSIM_UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    expected = json.loads(path.read_text())
    assert isinstance(got, dict)
    for key in sorted(set(expected) | set(got)):
        assert got.get(key) == expected.get(key), f"{path.name}: {key} differs"
