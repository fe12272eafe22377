"""Fits of the model's parameters to measurements (pure numpy, no I/O).

- ``fit_alpha_beta``: time = alpha + size / B, weighted in relative error, so small sizes pin
  the latency alpha and large ones the bandwidth B.
- ``fit_saturation``: rate = min(B_max x / s, B_max) over a parallelism x (thread blocks, SMs):
  the plateau B_max and the x = s where it is reached.
- ``robust_summary``: one value measured several times, as a median and its standard error.

Errors are 1-sigma standard errors. A fit that the data cannot determine raises ``FitError``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

# Scaled MAD: 1.4826 x MAD estimates sigma of normal data; the median's standard error is
# sqrt(pi / 2) = 1.2533 times the mean's.
MAD_TO_SIGMA = 1.4826
MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2)

Floats = NDArray[np.float64]


class FitError(ValueError):
    """The data cannot determine the fit (too few points, non-positive values, no slope)."""


@dataclass(frozen=True)
class AlphaBetaFit:
    alpha_s: float  # fixed cost per operation
    alpha_err_s: float
    bandwidth_Bps: float  # asymptotic bandwidth, bytes per second
    bandwidth_err_Bps: float
    points: int
    rel_rms: float  # root mean square of (fit - t) / t

    @property
    def alpha_us(self) -> float:
        return self.alpha_s * 1e6

    @property
    def bandwidth_GBps(self) -> float:
        return self.bandwidth_Bps / 1e9

    def time_s(self, size_bytes: float) -> float:
        return self.alpha_s + size_bytes / self.bandwidth_Bps


@dataclass(frozen=True)
class SaturationFit:
    plateau_Bps: float  # B_max
    plateau_err_Bps: float
    saturate_at: float  # s: blocks (or SMs) that reach the plateau
    saturate_at_err: float
    points: int
    rel_rms: float
    note: str = ""  # set when s or B_max is only a bound (no point below or above the knee)

    def rate_Bps(self, x: float) -> float:
        return min(self.plateau_Bps * x / self.saturate_at, self.plateau_Bps)


@dataclass(frozen=True)
class Summary:
    median: float
    err: float  # standard error of the median, from the scaled MAD; 0 for one value
    points: int
    rel_spread: float  # scaled MAD / median


def _positive(name: str, values: Sequence[float]) -> Floats:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise FitError(f"{name}: expected a flat sequence")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise FitError(f"{name}: every value must be finite and > 0")
    return arr


def fit_alpha_beta(sizes_bytes: Sequence[float], times_s: Sequence[float]) -> AlphaBetaFit:
    """Weighted least squares of t = alpha + n / B with sigma proportional to t.

    Linear in (alpha, 1/B): each row [1, n] / t = 1. Errors come from the covariance
    (A^T A)^-1 scaled by the residual variance; with exactly two points the fit is exact and
    the errors are NaN (no degrees of freedom left to estimate them).
    """
    n = _positive("sizes_bytes", sizes_bytes)
    t = _positive("times_s", times_s)
    if n.size != t.size:
        raise FitError(f"{n.size} sizes but {t.size} times")
    if n.size < 2:
        raise FitError(f"needs at least 2 points, got {n.size}")
    if np.ptp(n) == 0:
        raise FitError("needs at least 2 different sizes")
    a = np.column_stack([1.0 / t, n / t])
    coef, *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    alpha, inv_bw = float(coef[0]), float(coef[1])
    if inv_bw <= 0:
        raise FitError("bandwidth not determined: time does not grow with size")
    rel = (alpha + n * inv_bw - t) / t
    dof = n.size - 2
    if dof > 0:
        cov = np.linalg.inv(a.T @ a) * float(rel @ rel) / dof
        alpha_err, inv_bw_err = (math.sqrt(max(float(v), 0.0)) for v in np.diag(cov))
    else:
        alpha_err = inv_bw_err = math.nan
    return AlphaBetaFit(alpha, alpha_err, 1.0 / inv_bw, inv_bw_err / inv_bw**2, int(n.size),
                        _rms(rel))


def fit_saturation(blocks: Sequence[float], bandwidth_Bps: Sequence[float]) -> SaturationFit:
    """Least squares in relative error of rate = min(B_max x / s, B_max), solved exactly.

    The knee model's optimum is either interior to a split of the sorted points into a rising
    part (rate = a x) and a plateau, each then solved in closed form with s = B_max / a, or has
    s at a data point, where B_max is closed form too; each side needs two points or more
    (a point at the knee counts for both). Akaike's criterion then chooses between that knee
    and the one-parameter models (all points rising, all on the plateau): a knee must lower the
    residuals by more than noise does. When every point lies on the plateau, s is only known to
    be at most the smallest x; when none lies beyond the knee, B_max and s are lower bounds:
    ``note`` says so and their errors are NaN.
    """
    x = _positive("blocks", blocks)
    y = _positive("bandwidth_Bps", bandwidth_Bps)
    if x.size != y.size:
        raise FitError(f"{x.size} block counts but {y.size} bandwidths")
    if x.size < 2:
        raise FitError(f"needs at least 2 points, got {x.size}")
    order = np.argsort(x)
    x, y = x[order], y[order]
    rising_only = (_slope(x, y) * float(x[-1]), float(x[-1]))
    plateau_only = (_plateau(x, y, float(x[0])), float(x[0]))
    candidates = [(_aic(x, y, rising_only, 1), rising_only),
                  (_aic(x, y, plateau_only, 1), plateau_only)]
    knees = [p for p in _knees(x, y) if np.sum(x <= p[1]) >= 2 and np.sum(x >= p[1]) >= 2]
    if knees:
        knee = min(knees, key=lambda p: _cost(x, y, *p))
        candidates.append((_aic(x, y, knee, 2), knee))
    b_max, s = min(candidates, key=lambda c: c[0])[1]
    rel = (np.minimum(b_max * x / s, b_max) - y) / y
    note = ""
    if not np.any(x < s):
        s, note = float(x[0]), f"every point is on the plateau: saturates at {x[0]:g} or fewer"
    elif not np.any(x > s):
        s, b_max = float(x[-1]), float(b_max * x[-1] / s)
        note = f"no plateau beyond {x[-1]:g}: B_max and s are lower bounds"
    b_err, s_err = _saturation_errors(x, y, b_max, s, rel) if not note else (math.nan, math.nan)
    return SaturationFit(float(b_max), b_err, float(s), s_err, int(x.size), _rms(rel), note)


def _slope(x: Floats, y: Floats) -> float:
    """a minimising the relative residuals of y = a x."""
    return float(np.sum(x / y) / np.sum(x**2 / y**2))


def _plateau(x: Floats, y: Floats, s: float) -> float:
    """B_max minimising the relative residuals of y = min(B_max x / s, B_max) for fixed s."""
    c = np.minimum(x / s, 1.0) / y
    return float(np.sum(c) / np.sum(c**2))


def _knees(x: Floats, y: Floats) -> Iterator[tuple[float, float]]:
    """(B_max, s) candidates: each split's interior optimum where consistent, each x as s."""
    for k in range(1, x.size):
        b_max = float(np.sum(1 / y[k:]) / np.sum(1 / y[k:] ** 2))
        s = b_max / _slope(x[:k], y[:k])
        if x[k - 1] <= s <= x[k]:
            yield b_max, s
    for s in x:
        yield _plateau(x, y, float(s)), float(s)


def _cost(x: Floats, y: Floats, b_max: float, s: float) -> float:
    rel = (np.minimum(b_max * x / s, b_max) - y) / y
    return float(rel @ rel)


def _aic(x: Floats, y: Floats, p: tuple[float, float], params: int) -> float:
    floor = 1e-12  # relative residual variance of exact data
    return x.size * math.log(max(_cost(x, y, *p) / x.size, floor)) + 2 * params


def _saturation_errors(x: Floats, y: Floats, b_max: float, s: float, rel: Floats
                       ) -> tuple[float, float]:
    """Standard errors of (B_max, s) from the analytic Jacobian of the relative residuals."""
    rising = x < s
    jac = np.column_stack([np.where(rising, x / s, 1.0) / y,
                           np.where(rising, -b_max * x / s**2, 0.0) / y])
    dof = x.size - 2
    if dof <= 0:
        return math.nan, math.nan
    try:
        cov = np.linalg.inv(jac.T @ jac) * float(rel @ rel) / dof
    except np.linalg.LinAlgError:
        return math.nan, math.nan
    b_err, s_err = (math.sqrt(max(float(v), 0.0)) for v in np.diag(cov))
    return b_err, s_err


def robust_summary(values: Sequence[float]) -> Summary:
    """Median, and its standard error estimated from the spread: 1.2533 x 1.4826 x MAD / sqrt(n)
    (the scaled median absolute deviation as sigma, times the median's efficiency factor for
    normal data). One value has error 0: the caller must say the spread is unknown."""
    v = _positive("values", values)
    if v.size == 0:
        raise FitError("needs at least 1 value")
    med = float(np.median(v))
    sigma = MAD_TO_SIGMA * float(np.median(np.abs(v - med)))
    return Summary(med, MEDIAN_SE_FACTOR * sigma / math.sqrt(v.size), int(v.size), sigma / med)


def _rms(rel: Floats) -> float:
    return float(np.sqrt(np.mean(rel**2)))
