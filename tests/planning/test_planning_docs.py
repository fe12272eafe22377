"""docs/planning.md: questions 1 and 3, and question 6's cheapest sweep, regenerate their
committed outputs exactly; question 6's plot data are its tables' rows."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

from pkbsim.report.sweep_report import cell

PLANNING = ROOT / "docs" / "planning"

QUESTIONS = {
    "q1_moe_h100_vs_nvl72.md": "--vary task=27,28,29,31,49,50,51 --vary "
    "topology=dgx-h100,gb200-nvl72 --world-size 8 --preset production --metric "
    "t_roof,binding,nccl_reference,custom_best --baseline topology=dgx-h100",
    "q3_grpo_seq.md": "--task grpo --world-size 4 --set vocab=32000 --set batch=1 --vary "
    "seq=8:16384:x2 --metric t_roof,binding,nccl_reference,custom_best,attainment",
    # question 6's fat-tree all-to-all: 24 points up to 16,384 ranks, 41 s on the 2-core VM
    "q6_ib_all_to_all.md": "--collective all_to_all --topology h100-ib-2node --set "
    "node.count=2048 --set scale_out.rail_optimized=false --vary scale_out.oversubscription=1,2 "
    "--vary world_size=8:16384:x2 --sizes 1GiB --metric "
    "t_roof,binding,nccl_reference,busbw,attainment",
}
# question 6's four sweeps (the others take 1.5 to 4 minutes: not re-run); each wrote a Markdown
# table (--out) and kept its JSON-lines stream (--jsonl), which benchmarks/plot_q6_scale.py draws
Q6_SWEEPS = ("q6_ib_all_reduce", "q6_ib_all_to_all", "q6_nvl72_all_reduce",
             "q6_nvl72_all_to_all")


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


def test_question_6_plots_the_rows_of_its_tables() -> None:
    """Every row of each --jsonl file is a row of its Markdown table, and nothing else is."""
    for stem in Q6_SWEEPS:
        lines = (PLANNING / f"{stem}.jsonl").read_text().splitlines()
        header, rows = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
        assert header["pkbsim_sweep"] == 1
        table = [line for line in (PLANNING / f"{stem}.md").read_text().splitlines()
                 if line.startswith("|")]
        columns = [c.strip() for c in table[0].strip("|").split("|")]
        assert sorted("| " + " | ".join(cell(c, row.get(c)) for c in columns) + " |"
                      for row in rows) == sorted(table[2:]), stem
        assert all(row.get("error") is None for row in rows), stem


def test_the_doc_gives_question_6_commands_and_plot() -> None:
    doc = (ROOT / "docs" / "planning.md").read_text().replace("\\\n        ", "")
    for stem in Q6_SWEEPS:
        assert f"--out docs/planning/{stem}.md --jsonl docs/planning/{stem}.jsonl" in doc
    assert QUESTIONS["q6_ib_all_to_all.md"] in doc  # the command the slow test re-runs
    assert "python benchmarks/plot_q6_scale.py" in doc
    assert "![question 6](planning/q6_scale.png)" in doc
    assert (PLANNING / "q6_scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
