"""A plain (non-editable) install must carry topologies/ and tasks/ with it."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from paths import ROOT


@pytest.mark.slow
def test_wheel_carries_data_and_runs_outside_the_repository(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels),
                    str(ROOT)], check=True, capture_output=True)
    (wheel,) = wheels.glob("pkbsim-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        zf.extractall(site)
    for stem in (p.stem for p in (ROOT / "topologies").glob("*.yaml")):
        assert f"pkbsim/_data/topologies/{stem}.yaml" in names
    for stem in (p.stem for p in (ROOT / "tasks").glob("*.yaml")):
        assert f"pkbsim/_data/tasks/{stem}.yaml" in names
    for script in (p.name for p in (ROOT / "validate").glob("*.py")):
        assert f"pkbsim/_data/validate/{script}" in names  # the GPU scripts travel too
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = subprocess.run(
        [sys.executable, "-c", "import pkbsim.datafiles as d; print(d.__file__); "
                               "print(d.data_dir('tasks'))"],
        cwd=elsewhere, env=env, capture_output=True, text=True, check=True)
    module, data = probe.stdout.split()
    assert module.startswith(str(site)) and data == str(site / "pkbsim" / "_data" / "tasks")
    run = subprocess.run([sys.executable, "-m", "pkbsim", "analyze", "--task", "grpo"],
                         cwd=elsewhere, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert "t_roof" in run.stdout
