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
