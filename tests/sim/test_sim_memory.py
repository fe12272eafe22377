"""Memory as a bound (issue 33): the estimate before a simulation is built, the refusal over
SIM_MEMORY, and the guard that reads the resident size while it runs."""

from __future__ import annotations

import os
import tracemalloc
from typing import Any

import pytest

from pkbsim.errors import InfeasibleError
from pkbsim.limits import SIM_MEMORY
from pkbsim.planning.evaluate import collective_spec
from pkbsim.sim import Strategy, memory, simulate
from pkbsim.sim import resident as resident_memory
from pkbsim.sim.engine import Collective, SimOptions, Simulation
from pkbsim.sim.strategies import Builder
from pkbsim.task.loader import instantiate
from pkbsim.topology.loader import load_topology

ENV = SIM_MEMORY.env


def case(kind: str, w: int, size: float) -> tuple[Any, Any]:
    topo = load_topology("h100-ib-2node", {"node.count": max(1, w // 8)})
    return instantiate(collective_spec(kind), w, "pkb", {"size": size}), topo


def counted(kind: str, w: int, size: float, strategy: str = "nccl_reference"
            ) -> memory.Counts:
    inst, topo = case(kind, w, size)
    builder = Builder(Simulation(topo, w, SimOptions()), inst, Strategy(strategy))
    return memory.count(builder, 3)


@pytest.mark.parametrize("kind", ["all_reduce", "all_to_all", "all_gather"])
def test_the_counts_cover_what_the_simulation_keeps(kind: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Nodes, deliveries and route caches counted before building are at least those the
    simulation of every rank made; the flows alive at once at most the count of live
    endpoints."""
    inst, topo = case(kind, 32, 2**24)
    counts: list[memory.Counts] = []
    real_check = memory.check

    def check(builder: Builder, iterations: int, *args: Any) -> None:
        counts.append(memory.count(builder, iterations))
        real_check(builder, iterations, *args)

    monkeypatch.setattr(memory, "check", check)
    sims: list[Simulation] = []
    real_run = Simulation.run

    def run(self: Simulation) -> float:
        sims.append(self)
        return real_run(self)

    monkeypatch.setattr(Simulation, "run", run)
    simulate(inst, topo, Strategy("nccl_reference"), SimOptions(symmetry=False))
    (c,), (sim,) = counts, sims
    runs = {id(n.work.run_): n.work.run_ for n in sim.nodes if isinstance(n.work, Collective)}
    assert c.nodes >= len(sim.nodes)
    assert c.members >= sum(len(r.members) for r in runs.values())
    assert c.messages >= sum(len(r._arrived) for r in runs.values())
    assert c.routes >= sum(len(r._routes) for r in runs.values())
    assert c.pairs >= len(sim._uses)


@pytest.mark.parametrize("kind", ["all_reduce", "all_to_all"])
def test_the_estimate_grows_with_the_world_and_the_size(kind: str) -> None:
    by_w = [memory.estimate_bytes(counted(kind, w, 2**24)) for w in (8, 16, 32, 64)]
    assert by_w == sorted(by_w) and by_w[0] < by_w[-1]
    by_size = [memory.estimate_bytes(counted(kind, 16, size)) for size in (2**10, 2**20, 2**30)]
    assert by_size == sorted(by_size)


@pytest.mark.parametrize(("kind", "w", "strategy"), [
    ("all_reduce", 32, "nccl_reference"), ("all_to_all", 32, "nccl_reference"),
    ("all_to_all", 16, "custom_best")])
def test_the_estimate_is_over_what_python_allocates(kind: str, w: int, strategy: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The estimate of the largest run is above the peak of the bytes Python allocated while
    simulating (tracemalloc: deterministic, unlike the resident size)."""
    inst, topo = case(kind, w, 2**26)
    estimates: list[float] = []

    def check(builder: Builder, iterations: int, *args: Any) -> None:
        estimates.append(memory.estimate(builder, iterations))

    monkeypatch.setattr(memory, "check", check)
    simulate(inst, topo, Strategy(strategy))  # modules imported on first use, caches filled
    estimates.clear()
    tracemalloc.start()
    try:
        simulate(inst, topo, Strategy(strategy))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert max(estimates) >= peak, (max(estimates), peak)


def test_over_the_limit_is_refused_before_building(monkeypatch: pytest.MonkeyPatch) -> None:
    inst, topo = case("all_to_all", 64, 2**20)
    monkeypatch.setenv(ENV, "1")
    built: list[int] = []
    monkeypatch.setattr(Builder, "_reference_iteration",
                        lambda self, *a: built.append(1))
    with pytest.raises(InfeasibleError) as info:
        simulate(inst, topo, Strategy("nccl_reference"))
    text = str(info.value)
    assert "\n" not in text and ENV in text and "limit of 1 MiB" in text
    assert "estimated peak memory" in text and not built


def test_the_guard_stops_a_simulation_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The up-front check passes (the estimate is wrong, say); the resident size, read every
    WATCH_FLOWS transfers, then passes the limit: one error, not the OOM killer."""
    inst, topo = case("all_to_all", 64, 2**20)
    monkeypatch.setattr(memory, "check", lambda *a: None)
    monkeypatch.setattr("pkbsim.sim.network.WATCH_FLOWS", 1000)
    monkeypatch.setenv(ENV, "500")
    reads: list[int] = []

    def resident() -> int:
        reads.append(1)
        return 400 * 2**20 if len(reads) < 3 else 900 * 2**20

    monkeypatch.setattr(resident_memory, "read_resident", resident)
    with pytest.raises(InfeasibleError) as info:  # every rank: enough transfers to watch
        simulate(inst, topo, Strategy("nccl_reference"), SimOptions(symmetry=False))
    text = str(info.value)
    assert "\n" not in text and ENV in text and "resident memory" in text
    assert "900 is over the limit of 500 MiB" in text and len(reads) >= 3


def test_the_limit_defaults_to_the_memory_free(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    free = SIM_MEMORY.value
    assert free >= 1 and SIM_MEMORY.described
    monkeypatch.setenv(ENV, "123")
    assert SIM_MEMORY.value == 123
    monkeypatch.setattr("pkbsim.limits._AVAILABLE_MIB", [None])
    monkeypatch.delenv(ENV)
    assert SIM_MEMORY.value == SIM_MEMORY.default


def one_line(r: Any, *needles: str) -> None:
    assert r.code == 2, (r.code, r.out[-300:], r.err[-300:])
    assert r.err.count("\n") == 1 and r.err.startswith("pkbsim: error: "), r.err
    for needle in needles:
        assert needle in r.err, r.err


def test_the_cli_refuses_a_huge_world_in_one_line(cli, monkeypatch: pytest.MonkeyPatch
                                                  ) -> None:
    monkeypatch.setenv(ENV, "64")
    one_line(cli("simulate", "--task", "1_allreduce", "-w", "2048", "--topology",
                 "h100-ib-2node", "--set", "node.count=256"),
             "W = 2048", "estimated peak memory", "limit of 64 MiB", ENV)
    one_line(cli("simulate", "--task", "1_allreduce", "-w", "2048", "--topology",
                 "h100-ib-2node", "--set", "node.count=256", "--strategy", "custom_best"),
             "limit of 64 MiB", ENV)
    monkeypatch.setenv(ENV, "lots")
    one_line(cli("simulate", "--task", "grpo"), f"{ENV}='lots'")


def test_sweep_workers_share_the_memory_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep's worker processes each get their part of the limit (they run side by side),
    unless the user set it; the parent's environment is left as it was."""
    from pkbsim.planning import sweep

    monkeypatch.delenv(ENV, raising=False)
    whole = SIM_MEMORY.value
    with sweep._memory_shared(2):
        assert int(os.environ[ENV]) == whole // 2
    assert ENV not in os.environ
    monkeypatch.setenv(ENV, "1234")
    with sweep._memory_shared(2):
        assert os.environ[ENV] == "1234"
