"""Golden analyses: the deterministic output, field by field.

A deliberate model change regenerates them: PKBSIM_UPDATE_GOLDEN=1 pytest tests/test_golden.py
(then review the diff of tests/golden/ before committing).
"""

from __future__ import annotations

import pytest
from jsoncheck import check_golden
from paths import GOLDEN

from pkbsim.analysis import analyze
from pkbsim.report.analysis_json import to_dict

CASES = [
    ("grpo", "dgx-h100", None, "pkb"),
    ("grpo", "dgx-h100", 4, "blog-16k"),
    ("1", "dgx-a100", 8, "pkb"),
    ("13", "hgx-b200", 8, "llama70b-tp8"),
    ("8", "h100-ib-2node", 16, "pkb"),
]

@pytest.mark.parametrize(("task", "topo", "w", "preset"), CASES)
def test_golden(task: str, topo: str, w: int | None, preset: str) -> None:
    check_golden(to_dict(analyze(task, topo, w, preset, predict=True)),
                 GOLDEN / f"analyze_{task}_{topo}_{w or 'default'}_{preset}.json")
