"""pkbsim: how fast a multi-GPU kernel could be, how fast it is, and why the two differ.

The Python API (docs/python.md) mirrors the command line, one function per command::

    import pkbsim
    report = pkbsim.analyze("grpo", sets={"scale_up.bandwidth_GBps": 900})
    report.to_dict()["roofline"]["t_roof_us"]  # as in `pkbsim analyze --format json`

analyze, analyze_all, simulate, sweep, compare, inspect, record_trace (``pkbsim trace``),
load_topology and load_task return the same result objects the commands render, in reports
with ``to_dict()`` (the JSON contract) and, for tables, ``to_pandas()``; bad input raises a
typed PkbsimError (an argument of the wrong type: ArgumentError). The names load on first use
(PEP 562): ``import pkbsim`` imports nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# the commands, what they return (pkbsim.api) and what they raise (pkbsim.errors)
__all__ = [
    "AnalysisReport", "ArgumentError", "ComparisonReport", "ExpressionError", "InfeasibleError",
    "InspectionReport", "OverviewReport", "PkbsimError", "Report", "SimulationReport",
    "SweepReport", "TaskError", "TopologyError", "TraceReport", "UsageError", "__version__",
    "analyze", "analyze_all", "compare", "inspect", "load_task", "load_topology",
    "record_trace", "simulate", "sweep",
]
_ERRORS = {"PkbsimError", "TaskError", "TopologyError", "UsageError", "InfeasibleError",
           "ExpressionError", "ArgumentError"}

if TYPE_CHECKING:
    from pkbsim.api import (
        AnalysisReport,
        ComparisonReport,
        InspectionReport,
        OverviewReport,
        Report,
        SimulationReport,
        SweepReport,
        TraceReport,
        analyze,
        analyze_all,
        compare,
        inspect,
        load_task,
        load_topology,
        record_trace,
        simulate,
        sweep,
    )
    from pkbsim.errors import (
        ArgumentError,
        ExpressionError,
        InfeasibleError,
        PkbsimError,
        TaskError,
        TopologyError,
        UsageError,
    )


def __getattr__(name: str) -> Any:
    """A public name, imported on first use (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module 'pkbsim' has no attribute {name!r}")
    import importlib

    module = importlib.import_module("pkbsim.errors" if name in _ERRORS else "pkbsim.api")
    value = getattr(module, name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
