"""Golden simulations: the simulator is deterministic, so its JSON is pinned field by field.

A deliberate model change regenerates them:
PKBSIM_UPDATE_GOLDEN=1 pytest tests/sim/test_sim_golden.py
(then review the diff of tests/golden/ before committing).
"""

from __future__ import annotations

import pytest
from jsoncheck import check_golden
from paths import GOLDEN

from pkbsim.report.sim_report import to_dict
from pkbsim.roofline import roofline
from pkbsim.sim.run import run_simulation

CASES = [
    ("grpo", "nccl_reference", "dgx-h100", None, "pkb"),
    ("grpo", "custom_best", "dgx-h100", None, "pkb"),
    ("grpo", "nccl_reference", "dgx-h100", 4, "blog-16k"),
    ("1", "custom_best", "dgx-h100", 8, "pkb"),
    ("8", "nccl_reference", "h100-ib-2node", 16, "pkb"),
    ("54", "custom_best", "hgx-b200", 8, "pkb"),
]

@pytest.mark.parametrize(("task", "strategy", "topo", "w", "preset"), CASES)
def test_simulation_golden(task: str, strategy: str, topo: str, w: int | None,
                           preset: str) -> None:
    result = run_simulation(task, strategy, topo, w, preset)
    check_golden(to_dict(result, roofline(result.instance, result.topology)),
                 GOLDEN / f"simulate_{task}_{strategy}_{topo}_{w or 'default'}_{preset}.json")
