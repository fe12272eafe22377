"""The inspection's evaluation: the committed reports are what benchmarks/inspect_eval.py prints
now, and the scorer counts what it says it counts."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "inspect_eval.py"
REPORTS = ROOT / "docs" / "measurements" / "inspect_eval"
SETS = {"dev.md": "tests/data/inspect_eval", "heldout.md": "tests/data/inspect_eval_heldout",
        "holdout2.md": "tests/data/inspect_eval_holdout2"}
ROW = re.compile(r"^\| (\w+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| ([\d.-]+) \| "
                 r"([\d.-]+) \| ([\d.-]+) \|$")


def _scorer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("inspect_eval", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


SCORER = _scorer()


def report(*args: str) -> subprocess.CompletedProcess[str]:
    """The script's run, in this process (so coverage sees the inspection it drives)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            contextlib.chdir(ROOT):
        try:
            code = SCORER.main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_the_script_runs_as_a_command() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "tests/data/inspect_eval_heldout"],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (REPORTS / "heldout.md").read_text()


@pytest.mark.parametrize("name", sorted(SETS))
def test_committed_report_is_current(name: str) -> None:
    done = report(SETS[name])
    assert done.returncode == 0, done.stderr
    assert done.stdout == (REPORTS / name).read_text(), (
        f"regenerate: python benchmarks/inspect_eval.py {SETS[name]} --write "
        f"docs/measurements/inspect_eval/{name}")


def test_rows_add_up() -> None:
    text = (REPORTS / "dev.md").read_text()
    rows = [ROW.match(line) for line in text.splitlines()]
    assert len([r for r in rows if r]) >= 10
    for r in filter(None, rows):
        expected, found, tp, fp, fn = (int(r.group(i)) for i in range(2, 7))
        assert expected == tp + fn and found == tp + fp


def test_scorer_counts_a_wrong_label(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "import torch.distributed as dist\n"
        "def solution(x):\n"
        "    dist.all_reduce(x)  # expect: nccl_payload fallback\n"
        "    dist.barrier()  # expect: nccl_metadata hot\n"
        "    return x\n")
    done = report(str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "| hot | 1 | 2 | 1 | 1 | 0 | 0.500 | 1.000 | 0.667 |" in done.stdout
    assert "| fallback | 1 | 0 | 0 | 0 | 1 | - | 0.000 | 0.000 |" in done.stdout or \
        "| fallback | 1 | 0 | 0 | 0 | 1 | 0.000 | 0.000 | 0.000 |" in done.stdout
    assert "a.py:3 nccl_payload: expected fallback, found hot" in done.stdout


@pytest.mark.parametrize(("text", "message"), [
    ("x = 1  # expect: nccl_payload sideways\n", "line 1: expected '# expect: KIND PATH'"),
    ("# profile: dtype=fp99\n", "field profile"),
])
def test_scorer_rejects_bad_annotations(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "bad.py").write_text(text)
    done = report(str(tmp_path))
    assert done.returncode == 2 and message in done.stderr
    assert "Traceback" not in done.stderr
