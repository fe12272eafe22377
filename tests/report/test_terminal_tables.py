"""Tables for a newcomer's terminal (issue 30): they fit $COLUMNS, headers never break inside a
word, CSV cells carry no binary noise, bytes below 1 KiB are whole bytes."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest

from pkbsim.units import format_bytes

BOX = re.compile("[│┃━─┼╇]")
ROW = re.compile(r"^\s*\d")  # a row of a plain table (analyze --all, sweep): an id or a value

COMMANDS = [
    ("analyze", "--task", "grpo"),
    ("analyze", "--all"),
    ("simulate", "--task", "grpo"),
    ("topo", "list"),
    ("topo", "show", "dgx-h100"),
    ("tasks", "list"),
    ("tasks", "show", "grpo"),
    ("limits",),
    ("sweep", "--collective", "all_reduce", "--sizes", "1KiB:1MiB:x4", "--metric",
     "algbw,busbw,attainment,roofline", "--jobs", "1"),
]


def table_lines(command: tuple[str, ...], out: str) -> list[str]:
    plain = command[0] in ("sweep",) or command[:2] == ("analyze", "--all")
    return [line for line in out.splitlines()
            if BOX.search(line) or (plain and ROW.match(line))]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("columns", [80, 60])
def test_tables_fit_the_terminal_width(cli: Any, monkeypatch: pytest.MonkeyPatch,
                                       command: tuple[str, ...], columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    r = cli(*command)
    assert r.code == 0, r.err
    lines = table_lines(command, r.out)
    assert lines
    wide = [line for line in lines if len(line) > columns]
    assert not wide, f"{len(wide)} table lines over {columns}: {wide[0]!r}"


def test_headers_never_break_inside_a_word(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each metric column's name is printed whole (it read ``nccl_referenc / e_us``)."""
    monkeypatch.setenv("COLUMNS", "80")
    r = cli("sweep", "--collective", "all_reduce", "--sizes", "1KiB:1MiB:x4", "--metric",
            "algbw,busbw,attainment,roofline", "--jobs", "1")
    assert r.code == 0, r.err
    words = set(r.out.split())
    for name in ("nccl_reference_algbw_GBps", "nccl_reference_busbw_GBps",
                 "nccl_reference_attainment", "line_rate_busbw_GBps", "t_latency_us"):
        assert name in words
    # the size axis is repeated in every block of columns, so each block reads on its own
    assert r.out.count("   size ") >= 2


def test_output_to_a_pipe_keeps_its_width(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a terminal or $COLUMNS the output is the same everywhere (docs, goldens)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    wide = cli("analyze", "--task", "grpo").out
    monkeypatch.setenv("COLUMNS", "80")
    narrow = cli("analyze", "--task", "grpo").out
    assert max(len(line) for line in table_lines(("analyze",), wide)) > 80
    assert narrow != wide


def test_csv_cells_carry_no_float_noise(cli: Any) -> None:
    r = cli("sweep", "--task", "grpo", "--vary", "world_size=8", "--metric", "t_latency,t_roof",
            "--format", "csv")
    assert r.code == 0, r.err
    row = next(csv.DictReader(io.StringIO(r.out)))
    assert row["t_latency_us"] == "2.44"  # was 2.4399999999999995
    assert all(len(re.sub(r"[^0-9]", "", v.split("e")[0])) <= 10 for v in row.values())


def test_bytes_below_a_kib_are_whole_bytes(cli: Any) -> None:
    assert [format_bytes(x) for x in (13.5, 4.5, 2.25, 0.25, 0, 1000, 1536)] == [
        "14 B", "5 B", "2 B", "<1 B", "0 B", "1000 B", "1.5 KiB"]
    out = cli("analyze", "--all", "--filter", "id=21-24").out
    assert not re.search(r"\d\.\d+ B\b", out)
    assert re.search(r"clip_grad_norm_ep .* 14 B ", out)
