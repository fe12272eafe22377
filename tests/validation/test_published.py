"""Published nccl-tests results (tests/data/nccl_tests) and the error report over them."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from paths import ROOT

from pkbsim.errors import PkbsimError
from pkbsim.validation.published import load_tables, predict_row, strategy_for

DATA = ROOT / "tests" / "data" / "nccl_tests"
DOC = ROOT / "docs" / "measurements" / "nccl_tests_published.md"


def test_every_source_loads_with_its_url_and_a_model() -> None:
    tables = load_tables(DATA)
    assert len({t.file for t in tables}) >= 10
    for t in tables:
        assert t.url.startswith("https://"), t.file
        assert t.rows and all(size >= 0 and time > 0 for size, time in t.rows), t.file
    machines = {t.machine for t in tables}
    assert sum(m.split()[1] != "1" for m in machines) >= 2  # two multi-node machines


def test_environment_forces_the_run_s_choices() -> None:
    tables = {Path(t.file).name: t for t in load_tables(DATA)}
    strategy, sets = strategy_for(tables["gb200x72-coreweave-nvl72.yaml"])
    assert sets["scale_up.in_switch_reduction"] is False
    assert strategy.host_model == "nccl-tests"
    sharp = tables["h100x96-coreweave-sharp.yaml"]
    strategy, _ = strategy_for(sharp)
    assert strategy.overrides["call"].algorithm == "collnet"
    pat = replace(sharp, env=(("NCCL_ALGO", "PAT"),))
    with pytest.raises(PkbsimError, match="PAT has no model counterpart"):
        strategy_for(pat)
    row = predict_row(pat, 2**30, 1000.0)
    assert row.predicted_us is None and "PAT" in (row.error or "")


def test_a_large_single_node_all_reduce_is_within_ten_percent() -> None:
    """8 x H100, 1 GiB: NCCL's NVLS all-reduce measured 4,029 us (DGX benchmarking guide)."""
    tables = {Path(t.file).name: t for t in load_tables(DATA)}
    table = tables["h100x8-nvidia-dgxc-benchmarking.yaml"]
    measured = dict(table.rows)[2**30]
    row = predict_row(table, 2**30, measured)
    assert row.rel_error is not None and abs(row.rel_error) < 0.10


def test_a_broken_table_is_one_error_naming_the_field(tmp_path: Path) -> None:
    text = (DATA / "h100x8-nccl-tests-issue-290.yaml").read_text()
    (tmp_path / "bad.yaml").write_text(text.replace("[134217728, 613.3, 218.85, 382.99]",
                                                    "[134217728, fast]"))
    with pytest.raises(PkbsimError) as err:
        load_tables(tmp_path)
    assert "bad.yaml" in err.value.one_line() and "rows[0]" in err.value.one_line()


@pytest.mark.slow
def test_the_committed_report_is_what_the_command_prints(tmp_path: Path) -> None:
    doc = tmp_path / "report.md"
    doc.write_text("<!-- report:begin -->\n<!-- report:end -->\n")
    done = subprocess.run([sys.executable, "benchmarks/nccl_tests_published.py", "--write",
                           str(doc)], cwd=ROOT, capture_output=True, text=True, timeout=1200,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _block(doc.read_text()) == _block(DOC.read_text())


def _block(text: str) -> str:
    return text.split("<!-- report:begin -->", 1)[1].split("<!-- report:end -->", 1)[0]
