"""Golden analyses: the deterministic output, field by field.

A deliberate model change regenerates them: PKBSIM_UPDATE_GOLDEN=1 pytest tests/test_golden.py
(then review the diff of tests/golden/ before committing).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pkbsim.analysis import analyze
from pkbsim.report.json_report import to_dict

GOLDEN = Path(__file__).parent / "golden"
CASES = [
    ("grpo", "dgx-h100", None, "pkb"),
    ("grpo", "dgx-h100", 4, "blog-16k"),
    ("1", "dgx-a100", 8, "pkb"),
    ("13", "hgx-b200", 8, "llama70b-tp8"),
    ("8", "h100-ib-2node", 16, "pkb"),
]
VOLATILE = ("sha256", "file", "task_file", "topology_file", "task_sha256", "topology_sha256",
            "pkbsim_version")


def _strip(value: object) -> object:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


@pytest.mark.parametrize(("task", "topo", "w", "preset"), CASES)
def test_golden(task: str, topo: str, w: int | None, preset: str) -> None:
    got = _strip(to_dict(analyze(task, topo, w, preset, predict=True)))
    path = GOLDEN / f"analyze_{task}_{topo}_{w or 'default'}_{preset}.json"
    if os.environ.get("PKBSIM_UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    expected = json.loads(path.read_text())
    assert isinstance(got, dict)
    for key in sorted(set(expected) | set(got)):
        assert got.get(key) == expected.get(key), f"{path.name}: {key} differs"
