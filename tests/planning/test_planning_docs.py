"""docs/planning.md: questions 1 and 3 regenerate their committed outputs exactly."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

PLANNING = ROOT / "docs" / "planning"

QUESTIONS = {
    "q1_moe_h100_vs_nvl72.md": "--vary task=27,28,29,31,49,50,51 --vary "
    "topology=dgx-h100,gb200-nvl72 --world-size 8 --preset production --metric "
    "t_roof,binding,nccl_reference,custom_best --baseline topology=dgx-h100",
    "q3_grpo_seq.md": "--task grpo --world-size 4 --set vocab=32000 --set batch=1 --vary "
    "seq=8:16384:x2 --metric t_roof,binding,nccl_reference,custom_best,attainment",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(QUESTIONS))
def test_question_output_is_what_the_command_prints(name: str, tmp_path: Path) -> None:
    out = tmp_path / name
    cmd = [sys.executable, "-m", "pkbsim", "sweep", *shlex.split(QUESTIONS[name]),
           "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == (PLANNING / name).read_text()


def test_the_doc_quotes_the_committed_outputs() -> None:
    doc = (ROOT / "docs" / "planning.md").read_text()
    for name in ("q1_moe_h100_vs_nvl72.md", "q2_nvls.md", "q4_nvlink_x2.md"):
        for line in (PLANNING / name).read_text().splitlines():
            if "_speedup against" in line and line.split(";")[0] in doc:
                break
        else:
            pytest.fail(f"docs/planning.md quotes no summary line of planning/{name}")
    for name in QUESTIONS:
        assert QUESTIONS[name].split(" --")[0] in doc.replace("\\\n        ", "")
