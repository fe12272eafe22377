"""Discrete-event simulation (simpy) of a task under a strategy: predicted time and timeline."""

from __future__ import annotations

from pkbsim.roofline import check_world_size
from pkbsim.sim.engine import SimOptions, Simulation
from pkbsim.sim.result import SimResult, summarize
from pkbsim.sim.strategies import CHUNK_CHOICES, STRATEGIES, Builder, Strategy
from pkbsim.task.schema import ComputeOp, TaskInstance
from pkbsim.topology.schema import Topology

__all__ = ["STRATEGIES", "SimOptions", "SimResult", "Strategy", "simulate"]


def simulate(inst: TaskInstance, topo: Topology, strategy: Strategy,
             options: SimOptions | None = None) -> SimResult:
    """Predict ``inst`` on ``topo`` under ``strategy``. custom_best without a fixed chunk count
    tries each of CHUNK_CHOICES and keeps the fastest (ties: fewer pieces)."""
    check_world_size(inst, topo)
    options = options or SimOptions()
    if not any(isinstance(op, ComputeOp) for op in inst.ops):
        options = SimOptions(options.iterations, options.trace, hbm_contention=False)
    if strategy.name == "custom_best" and strategy.chunks is None:
        tried = {k: _run(inst, topo, strategy, options, k) for k in CHUNK_CHOICES}
        best = min(tried, key=lambda k: (tried[k].predicted_us, k))
        result = tried[best]
        object.__setattr__(result, "tried", {k: r.predicted_us for k, r in tried.items()})
        return result
    return _run(inst, topo, strategy, options, strategy.chunks or 1)


def _run(inst: TaskInstance, topo: Topology, strategy: Strategy, options: SimOptions,
         pieces: int) -> SimResult:
    sim = Simulation(topo, inst.world_size, options)
    builder = Builder(sim, inst, strategy, pieces)
    builder.build(options.iterations)
    sim.run()
    return summarize(sim, builder, inst, strategy, options.iterations)
