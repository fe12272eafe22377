"""Derived planning answers (pkbsim.planning.derived, pkbsim plan) against closed forms.

At 2 ranks a ring all-reduce (C = 1) and a direct send/recv follow alpha-beta exactly in the
simulator (docs/metrics.md 9.3): t = latency_us + steps * step_latency_us + m / (eta B), with
steps 2 and 1. The threshold and crossover sizes then solve in closed form.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pkbsim.planning.derived import (
    GRANULARITY_BYTES,
    REL_TOL,
    Contender,
    crossovers,
    line_rate_busbw_Bps,
    threshold,
)
from pkbsim.planning.derived_task import latency_exit, sm_split
from pkbsim.planning.evaluate import Target, evaluate
from pkbsim.sim import simulate_collective
from pkbsim.topology import load_topology

B = 450e9  # dgx-h100: 18 x 25 GB/s per GPU per direction


def _within(found: int | None, exact: float) -> None:
    """found is the first grid size at or above the exact answer, within the search's tolerance."""
    assert found is not None
    assert exact <= found <= exact * (1 + REL_TOL) + GRANULARITY_BYTES


def test_ring_all_reduce_at_two_ranks_is_alpha_beta() -> None:
    topo = load_topology("dgx-h100")
    mech = topo.mechanisms["sm_ldst"]
    for m in (1e3, 1e6, 1e8):
        t = simulate_collective(topo, "all_reduce", m, 2, "ring", "sm_ldst").time_s
        assert t == pytest.approx(mech.latency_s + 2 * mech.step_latency_s
                                  + m / (mech.efficiency * B), rel=1e-12)


def test_threshold_closed_form() -> None:
    # busbw = m / t (all-reduce, n = 2) = f B  =>  m* = f B a eta / (eta - f)
    topo = load_topology("dgx-h100")
    mech = topo.mechanisms["sm_ldst"]
    a, eta, f = mech.latency_s + 2 * mech.step_latency_s, mech.efficiency, 0.5
    assert line_rate_busbw_Bps(topo, "all_reduce", 2) == pytest.approx(B, rel=1e-12)
    [res] = threshold(topo, "all_reduce", 2, f, ["sm_ldst"], "ring")
    exact = f * B * a * eta / (eta - f)  # 1,680,750 B
    _within(res.size_bytes, exact)
    assert res.size_bytes % GRANULARITY_BYTES == 0
    assert res.algorithm == "ring" and res.busbw_at_size_GBps is not None
    assert res.busbw_at_size_GBps >= 0.5 * 450
    assert res.line_rate_busbw_GBps == pytest.approx(450)


def test_threshold_not_reached_reports_the_max() -> None:
    topo = load_topology("dgx-h100")
    [res] = threshold(topo, "all_reduce", 2, 0.9, ["sm_ldst"], "ring", hi_bytes=2**30)
    assert res.size_bytes is None and res.algorithm is None
    assert res.max_busbw_at_bytes == 2**30
    # the largest size tried: 2^30 / (a + 2^30 / (eta B))
    mech = topo.mechanisms["sm_ldst"]
    t = mech.latency_s + 2 * mech.step_latency_s + 2**30 / (mech.efficiency * B)
    assert res.max_busbw_GBps == pytest.approx(2**30 / t / 1e9, rel=1e-9)


def test_crossover_closed_form() -> None:
    # send/recv, 2 ranks: a1 + S/(eta1 B) = a2 + S/(eta2 B)
    topo = load_topology("dgx-h100", {"mechanisms.tma.latency_us": 5.0})
    m1, m2 = topo.mechanisms["sm_ldst"], topo.mechanisms["tma"]
    a1, a2 = m1.latency_s + m1.step_latency_s, m2.latency_s + m2.step_latency_s
    exact = (a2 - a1) / (1 / (m1.efficiency * B) - 1 / (m2.efficiency * B))  # ~36.6 MB
    found = crossovers(topo, "send_recv", 2, [Contender("direct", "sm_ldst"),
                                              Contender("direct", "tma")])
    assert len(found) == 1
    c = found[0]
    _within(c.size_bytes, exact)
    assert c.below_bytes < exact
    assert (c.below, c.above) == ("direct/sm_ldst", "direct/tma")
    assert c.above_time_us <= c.below_time_us


@pytest.mark.slow
def test_crossover_modes_on_dgx_h100() -> None:
    topo = load_topology("dgx-h100")
    algs = crossovers(topo, "all_reduce", 8, "algorithms", 2**10, 2**26)
    # one-shot (1 step) at small sizes, then two-shot, then NVLS at large sizes
    assert [c.below for c in algs] + [algs[-1].above] == ["one_shot", "two_shot", "nvls"]
    sizes = [c.size_bytes for c in algs]
    assert sizes == sorted(sizes)
    mechs = crossovers(topo, "all_gather", 8, "mechanisms", 2**10, 2**26)
    assert [(c.below, c.above) for c in mechs] == [("tma", "copy_engine")]


def _nvls_comm_s(m_rows: int, n_cols: int) -> float:
    """Task 13's all-reduce bound on dgx-h100: NVLS, (n+1)/n x 2 M N bytes on nvls_multimem."""
    eta = load_topology("dgx-h100").mechanisms["nvls_multimem"].efficiency
    return 9 / 8 * 2 * m_rows * n_cols / (eta * B)


@pytest.mark.slow
@pytest.mark.parametrize("n_cols, direction", [(1024, "down"), (64, "up")])
def test_latency_exit_closed_form(n_cols: int, direction: str) -> None:
    topo = load_topology("dgx-h100")
    floor = (topo.latency.kernel_launch_us + topo.scale_up.signal_latency_us) * 1e-6
    m_star = next(m for m in range(1, 10**5) if _nvls_comm_s(m, n_cols) > floor)
    res = latency_exit(Target(task="13"), "M", {"N": n_cols})
    assert res.direction == direction
    assert res.start_value == 1024
    if direction == "up":  # smallest value out of the latency regime
        assert (res.value, res.other_value) == (m_star, m_star - 1)
        assert res.binding == "comm"
    else:  # largest latency-bound value
        assert (res.value, res.other_value) == (m_star - 1, m_star)
        assert res.binding == "latency"
    row = evaluate(Target(task="13"), {"N": n_cols, "M": m_star}, ("binding",))
    assert row["binding"] == "comm"


@pytest.mark.slow
def test_sm_split_returns_the_argmin_of_its_curve() -> None:
    res = sm_split(Target(task="13"))
    times = {p.sms: p.time_us for p in res.curve}
    assert [p.sms for p in res.curve] == sorted(times)
    assert {1, 2, 4, 8, 16, 32, 64, 128, 132} <= set(times)
    assert res.best_time_us == min(times.values())
    assert res.best_sms == min(s for s, t in times.items() if t == res.best_time_us)
    assert times[1] > 1.5 * res.best_time_us  # one SM starves the all-reduce
    assert res.default_sms == (15,)  # two_shot on TMA saturates at 15 SMs
    assert res.default_time_us == pytest.approx(times[15])


def _pkbsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pkbsim", "plan", *args],
                          capture_output=True, text=True, timeout=300)


def test_cli_threshold_and_crossover() -> None:
    run = _pkbsim("threshold", "--collective", "all_reduce", "--world-size", "2",
                  "--mechanism", "sm_ldst", "--algorithm", "ring", "--fraction", "0.5",
                  "--format", "json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["schema"] == "pkbsim.plan/1" and doc["command"] == "threshold"
    _within(doc["results"][0]["size_bytes"], 1680750)
    run = _pkbsim("crossover", "--collective", "send_recv", "--world-size", "2",
                  "--contender", "direct/sm_ldst", "--contender", "direct/tma",
                  "--set", "mechanisms.tma.latency_us=5")
    assert run.returncode == 0, run.stderr
    assert "direct/sm_ldst" in run.stdout and "35.1 MiB" in run.stdout


@pytest.mark.slow
def test_cli_sm_split_and_latency_exit() -> None:
    run = _pkbsim("sm-split", "--task", "13", "--format", "json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["results"]["best_sms"] == 15
    run = _pkbsim("latency-exit", "--task", "13", "--param", "M")
    assert run.returncode == 0, run.stderr
    assert "largest latency-bound value: M = 216" in run.stdout


@pytest.mark.parametrize("args, needle", [
    (["threshold", "--collective", "all_reduce_x"], "--collective all_reduce_x"),
    (["threshold", "--collective", "all_reduce", "--fraction", "1.5"], "--fraction 1.5"),
    (["threshold", "--collective", "all_reduce", "--fraction", "0"], "--fraction 0"),
    (["crossover", "--collective", "all_reduce", "--contender", "warp"], "--contender warp"),
    (["crossover", "--collective", "all_reduce", "--sizes", "1MiB"], "--sizes 1MiB"),
    (["latency-exit", "--task", "13", "--param", "Q"], "--param Q"),
    (["sm-split", "--task", "13", "--max-sms", "500"], "--max-sms 500"),
])
def test_cli_bad_input_is_one_line(args: list[str], needle: str) -> None:
    run = _pkbsim(*args)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and needle in run.stderr
    assert "Traceback" not in run.stderr


def test_plan_plots_are_images_and_readable(cli: Any, tmp_path: Path) -> None:
    import os
    import stat

    for command, extra in (("crossover", ["--mode", "algorithms"]),
                           ("threshold", ["--fraction", "0.5"])):
        plot = tmp_path / f"{command}.png"
        got = cli("plan", command, "--collective", "all_gather", "--world-size", "4",
                  "--sizes", "1KiB:16MiB", *extra, "--plot", str(plot))
        assert got.code == 0, got.err
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        mode = stat.S_IMODE(os.stat(plot).st_mode)
        assert mode & stat.S_IRUSR and mode == 0o666 & ~_umask()
    bad = cli("plan", "threshold", "--collective", "all_gather", "--plot", str(tmp_path / "x.gif"))
    assert bad.code == 2 and "--plot" in bad.err and len(bad.err.strip().splitlines()) == 1


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask
