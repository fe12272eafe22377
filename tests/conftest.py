from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from pkbsim.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables at their own width, as in a pipe, whatever $COLUMNS the shell exports."""
    monkeypatch.delenv("COLUMNS", raising=False)


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run ``pkbsim ARGS`` in-process through the real entry point."""

    def run(*args: str) -> CliResult:
        code = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def h100_data() -> dict:
    return yaml.safe_load((ROOT / "topologies" / "dgx-h100.yaml").read_text())


@pytest.fixture
def write_yaml(tmp_path: Path):
    def write(data: dict, name: str = "file.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


def python() -> str:
    return sys.executable
