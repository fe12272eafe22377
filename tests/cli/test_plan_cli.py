"""``pkbsim plan`` in-process on small ranges: each answer as a table and as JSON, the plot, and
its inputs echoed (the slow, closed-form checks are in tests/planning/)."""

from __future__ import annotations

import json
from pathlib import Path


def test_crossover_with_contenders(cli) -> None:
    r = cli("plan", "crossover", "--collective", "all_gather", "--contender", "ring",
            "--contender", "direct", "--sizes", "1KiB:64KiB", "--format", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["schema"] == "pkbsim.plan/1" and doc["command"] == "crossover"
    assert [c["algorithm"] for c in doc["inputs"]["contenders"]] == ["ring", "direct"]
    table = cli("plan", "crossover", "--collective", "all_gather", "--contender", "ring",
                "--contender", "direct", "--sizes", "1KiB:64KiB")
    assert table.code == 0 and "fastest of ring, direct" in table.out
    bad = cli("plan", "crossover", "--collective", "all_gather", "--contender", "ring/warp")
    assert bad.code == 2 and "--contender ring/warp" in bad.err


def test_sm_split_and_latency_exit(cli) -> None:
    r = cli("plan", "sm-split", "-t", "1", "--max-sms", "8", "--format", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)["results"]
    assert doc["best_sms"] in [p["sms"] for p in doc["curve"]]
    table = cli("plan", "sm-split", "-t", "1", "--max-sms", "8", "--set", "M=2048")
    assert table.code == 0 and "<- best" in table.out
    exit_ = cli("plan", "latency-exit", "-t", "1", "--param", "M", "--max-value", "65536",
                "-w", "4")
    assert exit_.code == 0 and "M = " in exit_.out and "4 ranks" in exit_.out


def test_threshold_plot(cli, tmp_path: Path) -> None:
    plot = tmp_path / "t.png"
    r = cli("plan", "threshold", "--collective", "all_reduce", "--sizes", "1KiB:1MiB",
            "--mechanism", "tma", "--plot", str(plot), "--set", "mechanisms.tma.latency_us=2")
    assert r.code == 0, r.err
    assert plot.read_bytes()[:4] == b"\x89PNG" and "Threshold per mechanism" in r.out
    bad = cli("plan", "threshold", "--collective", "all_reduce", "--sizes", "1KiB")
    assert bad.code == 2 and "--sizes 1KiB" in bad.err


def test_threshold_reports_progress_per_size(cli) -> None:
    """The search is told step by step (issue 30: 6-12 s without a sign of life)."""
    from pkbsim.planning.derived import threshold
    from pkbsim.topology import load_topology

    seen: list[tuple[int, int, str]] = []
    res = threshold(load_topology("dgx-h100"), "all_reduce", 8, 0.8, ["tma", "sm_ldst"],
                    lo_bytes=1024, hi_bytes=2**20,
                    progress=lambda done, total, what: seen.append((done, total, what)))
    assert len(res) == 2
    assert seen[0] == (1, 22, "tma at 1,024 B") and seen[-1] == (22, 22, "done")
    assert [s[0] for s in seen] == sorted(s[0] for s in seen)
    assert any(what.startswith("sm_ldst at") for _, _, what in seen)


def test_plan_progress_goes_to_a_terminal_stderr_only(cli, monkeypatch) -> None:
    import sys

    args = ("plan", "threshold", "--collective", "all_reduce", "--sizes", "1KiB:64KiB",
            "--mechanism", "tma")
    quiet = cli(*args)
    assert quiet.code == 0 and quiet.err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("TERM", "xterm")
    shown = cli(*args)
    assert shown.code == 0 and shown.out == quiet.out
    assert "threshold" in shown.err and "tma at" in shown.err
    cross = cli("plan", "crossover", "--collective", "all_gather", "--contender", "ring",
                "--contender", "direct", "--sizes", "1KiB:64KiB")
    assert cross.code == 0 and "crossover" in cross.err and " B" in cross.err
