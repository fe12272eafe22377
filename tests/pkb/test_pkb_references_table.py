"""docs/measurements/pkb_references_h200_w1.md: its table is what the committed run's data give."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from paths import ROOT

DOC = ROOT / "docs" / "measurements" / "pkb_references_h200_w1.md"
DATA = Path("docs/measurements/pkb_references_h200_w1")


def generated_block() -> str:
    text = DOC.read_text()
    return text.split("<!-- begin generated -->\n", 1)[1].split("<!-- end generated -->", 1)[0]


def test_the_committed_table_regenerates_from_the_logs() -> None:
    cmd = [sys.executable, "benchmarks/pkb_references_vs_model.py", str(DATA / "logs"),
           *(str(DATA / f"summary{s}.json") for s in ("", "_48", "_long")),
           "--also", f"fresh processes={DATA / 'fresh' / 'logs'}",
           "--also", f"first sweep={DATA / 'first_sweep_logs'}"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == generated_block()


def test_every_problem_is_accounted_for() -> None:
    rows: dict[str, str] = {}
    for name in ("summary.json", "summary_48.json", "summary_long.json"):
        rows.update({r["problem"]: r["status"]
                     for r in json.loads((ROOT / DATA / name).read_text())["problems"]})
    assert len(rows) == 87
    block = generated_block()
    for stem, status in rows.items():
        assert (f"| {stem} |" in block) == (status == "ok"), stem
        if status != "ok":
            assert f"- {stem}: {status}" in block
