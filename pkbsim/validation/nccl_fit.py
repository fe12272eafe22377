"""One global value per fabric kind, fitted on the fit half of the published nccl-tests tables.

The constants are the fabric kinds' ``step_latency_us`` (topologies/fabrics/<kind>.yaml): what
one NCCL step over a kind of fabric costs beyond NCCL's own tuner constant. Inside a node (the
scale-up kind) one value per protocol, LL, LL128 and Simple; across nodes one value per network
kind (InfiniBand, RoCE, EFA, ...), paid twice by Simple (NCCL's flush). Nothing is set per source
or per table: a table only selects which kinds its rows use.

The fit minimises the squared log error, predicted / measured, of the fit half's rows, each
source weighted equally (a row weighs 1 / its source's row count). The simulator is the model, so
the fit is Gauss-Newton: each round simulates every row at the current constants and again with
each constant moved by ``DELTA_US``, solves the linearised problem with bounds (no negative
cost), and moves there. Pure: returns the constants and each row's prediction.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from pkbsim.topology.fabric_kinds import PROTOCOLS, fabric_kinds
from pkbsim.validation.published import Row, Table, predict_many

DELTA_US = 2.0  # the finite difference
ROUNDS = 2


@dataclass(frozen=True)
class FitResult:
    constants: dict[str, float]  # "nvswitch.LL", ..., "infiniband", "efa", ...
    rows: list[Row]  # the fit half, predicted with the fitted constants
    rounds: list[float]  # the weighted sum of squared log errors after each round
    fitted: tuple[str, ...]  # constants some fit row uses (the rest keep their value)


def parameters_of(table: Table, protocol: str | None = None) -> list[str]:
    """The constants a table's rows can depend on; with ``protocol`` (the one NCCL ran a row
    with: its choice is by its own constants, so it does not move with these), a row's."""
    protocols = PROTOCOLS if protocol is None else (protocol,)
    out = [f"{_scale_up_kind(table)}.{p}" for p in protocols]
    if table.nodes > 1:
        out.append(table.fabric)
    return out


def _scale_up_kind(table: Table) -> str:
    return table.fabric if table.nodes == 1 else "nvswitch"


def current_constants() -> dict[str, float]:
    out: dict[str, float] = {}
    for kind, fk in fabric_kinds().items():
        if fk.scope == "scale_up":
            out.update({f"{kind}.{p}": v for p, v in fk.protocol_steps_us().items()})
        else:
            out[kind] = fk.step_latency_us
    return out


def sets_for(table: Table, constants: Mapping[str, float]) -> dict[str, Any]:
    """The topology fields that put ``constants`` in the table's machine."""
    up = _scale_up_kind(table)
    sets: dict[str, Any] = {"scale_up.step_latency_us":
                            {p: constants[f"{up}.{p}"] for p in PROTOCOLS}}
    if table.nodes > 1:
        sets["scale_out.step_latency_us"] = constants[table.fabric]
    return sets


def fit(tables: list[Table], jobs: int = 1, rounds: int = ROUNDS,
        start: Mapping[str, float] | None = None) -> FitResult:
    """Fit the constants the fit half's rows use, from ``start`` (the shipped values)."""
    work = [(t, s, m) for t in tables if t.half == "fit" and not t.excluded
            for s, m in t.rows if s > 0 and m > 0]
    per_source = Counter(t.file for t, _s, _m in work)
    weights = np.array([1.0 / math.sqrt(per_source[t.file]) for t, _s, _m in work])
    measured = np.array([m for _t, _s, m in work])
    theta = dict(start) if start is not None else current_constants()
    history: list[float] = []
    rows = predict_many([(t, s, m, sets_for(t, theta)) for t, s, m in work], jobs)
    names = sorted({n for (t, _s, _m), row in zip(work, rows, strict=True)
                    for n in parameters_of(t, row.protocol)})
    for _ in range(rounds):
        base = np.array([r.predicted_us or math.nan for r in rows])
        moves = []
        index = []
        for i, ((t, s, m), row) in enumerate(zip(work, rows, strict=True)):
            for name in parameters_of(t, row.protocol):
                moves.append((t, s, m, sets_for(t, {**theta, name: theta[name] + DELTA_US})))
                index.append((i, names.index(name)))
        jac = np.zeros((len(work), len(names)))
        for (i, j), r in zip(index, predict_many(moves, jobs), strict=True):
            jac[i, j] = ((r.predicted_us or math.nan) - base[i]) / DELTA_US
        ok = np.isfinite(base) & np.all(np.isfinite(jac), axis=1)
        history.append(float(np.sum((weights * np.log(base / measured))[ok] ** 2)))
        x0 = np.array([theta[n] for n in names])

        def residual(x: np.ndarray, x0: np.ndarray = x0, jac: np.ndarray = jac,
                     base: np.ndarray = base, ok: np.ndarray = ok) -> np.ndarray:
            t = np.maximum(base + jac @ (x - x0), 1e-3)
            out: np.ndarray = (weights * np.log(t / measured))[ok]
            return out

        # started just inside the bound: from a constant exactly at 0 the solver does not move
        sol = least_squares(residual, np.maximum(x0, 0.01), bounds=(0.0, np.inf))
        theta = {**theta, **{n: float(round(v, 3)) for n, v in zip(names, sol.x, strict=True)}}
        rows = predict_many([(t, s, m, sets_for(t, theta)) for t, s, m in work], jobs)
    base = np.array([r.predicted_us or math.nan for r in rows])
    ok = np.isfinite(base)
    history.append(float(np.sum((weights * np.log(base / measured))[ok] ** 2)))
    return FitResult(theta, rows, history, tuple(names))
