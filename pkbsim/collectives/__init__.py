"""Collective algorithms: each a small registered unit that says which bytes go where."""

from pkbsim.collectives import algorithms as _algorithms  # noqa: F401  (registers them)
from pkbsim.collectives import nccl_trees as _nccl_trees  # noqa: F401  (registers them)
from pkbsim.collectives.bandwidth import BUSBW_FACTOR, algbw_busbw
from pkbsim.collectives.base import ALGORITHMS, Algorithm, Flow, algorithms_for, register

__all__ = ["ALGORITHMS", "BUSBW_FACTOR", "Algorithm", "Flow", "algbw_busbw", "algorithms_for",
           "register"]
