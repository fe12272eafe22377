"""PKB's reference as the comparator and the planner model it: one choice, made in one place.

:func:`reference_model` picks the model of PKB's eager PyTorch + NCCL reference for a task
instance: the traced program pkbsim ships for it (``pkbsim.trace.store.reference_program``),
else the task file's ops. The result carries the ``nccl_reference`` strategy that runs it, the
program and a label saying which, so the predicted time, the gap decomposition's description
of the reference (``gap.reference_inspection``) and every what-if that starts from the
reference use the same model. Per-op overrides name the task file's ops, so with them the
task file's model is used (as ``pkbsim simulate`` does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pkbsim.sim import SimOptions, SimResult, Strategy, simulate, trace_stands_for
from pkbsim.sim.strategies import OpOverride
from pkbsim.task.schema import TaskInstance
from pkbsim.topology.schema import Topology
from pkbsim.trace.program import Program
from pkbsim.trace.store import ChosenProgram, reference_program

TRACE = "trace"  # the traced program
TASK = "task"  # the task file's ops
NO_TRACE = "task file's model (no traced program for this task)"
OVERRIDDEN = "task file's model (per-op overrides name its ops)"
CANNOT_STAND = ("task file's model (the traced program cannot stand for this instance: another "
                "rank's work, or its collectives, were not traced)")


@dataclass(frozen=True)
class ReferenceModel:
    """The chosen model of PKB's reference for one task instance."""

    inst: TaskInstance = field(compare=False)
    strategy: Strategy  # nccl_reference, its program fixed (None: the task file's ops)
    label: str  # which model, in words

    @property
    def program(self) -> ChosenProgram | None:
        return self.strategy.program

    @property
    def source(self) -> str:
        """TRACE or TASK."""
        return TRACE if self.program is not None else TASK

    def simulate(self, topo: Topology, options: SimOptions | None = None) -> SimResult:
        return simulate(self.inst, topo, self.strategy, options)

    def without_host_syncs(self) -> ReferenceModel:
        """The same model with no host synchronisation: a traced program's sync boundaries
        become plain segment ends; the task file's ops lose their ``host_syncs``."""
        chosen = self.program
        if chosen is None:
            if not any(o.host_syncs for o in self.inst.ops):
                return self
            inst = replace(self.inst, ops=tuple(replace(o, host_syncs=0) for o in self.inst.ops))
            return replace(self, inst=inst)
        prog = chosen.program
        if not any(s.end == "sync" for s in prog.segments):
            return self
        plain = Program(tuple(replace(s, end="end") if s.end == "sync" else s
                              for s in prog.segments), prog.meta)
        return replace(self, strategy=replace(self.strategy,
                                              program=replace(chosen, program=plain)))


def reference_model(inst: TaskInstance, overrides: Mapping[str, OpOverride] | None = None,
                    host_model: str = "torch", program: ChosenProgram | None = None
                    ) -> ReferenceModel:
    """PKB's reference for ``inst``: ``program`` where given (traced on demand), else its
    traced program when one is shipped (and no per-op ``overrides``), where that program can
    stand for the instance (``pkbsim.sim.trace_stands_for``), else the task file's ops."""
    ops = dict(overrides or {})
    chosen = None if ops else program or reference_program(inst)
    stands = chosen is None or trace_stands_for(chosen, inst)
    if not stands:
        chosen = None
    strategy = Strategy("nccl_reference", ops, reference=TRACE if chosen else TASK,
                        program=chosen, host_model=host_model)
    label = (chosen.describe() if chosen is not None else OVERRIDDEN if ops
             else NO_TRACE if stands else CANNOT_STAND)
    return ReferenceModel(inst, strategy, label)
