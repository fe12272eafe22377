"""The fits of pkbsim.validation.fit on synthetic data with known parameters."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from pkbsim.validation.fit import FitError, fit_alpha_beta, fit_saturation, robust_summary

SIZES = [2.0**k for k in range(10, 31, 2)]  # 1 KiB .. 1 GiB, 11 sizes
ALPHA_S, BANDWIDTH_BPS = 3.0e-6, 400e9


def _times(alpha: float, bw: float, noise: float, rng: random.Random) -> list[float]:
    return [(alpha + n / bw) * (1 + noise * rng.gauss(0, 1)) for n in SIZES]


def test_alpha_beta_exact_data_is_recovered_exactly() -> None:
    fit = fit_alpha_beta(SIZES, _times(ALPHA_S, BANDWIDTH_BPS, 0.0, random.Random(0)))
    assert fit.alpha_s == pytest.approx(ALPHA_S, rel=1e-9)
    assert fit.bandwidth_Bps == pytest.approx(BANDWIDTH_BPS, rel=1e-9)
    assert fit.points == 11
    assert fit.rel_rms < 1e-12
    assert fit.alpha_err_s < 1e-15 and fit.bandwidth_err_Bps < 1e-3
    assert fit.time_s(1e6) == pytest.approx(ALPHA_S + 1e6 / BANDWIDTH_BPS)


def test_alpha_beta_noisy_data_is_recovered_within_its_errors() -> None:
    # 1% multiplicative noise on 11 points: alpha is pinned by the ~5 latency-bound sizes
    # (about 1% / sqrt(5) = 0.45%), B by the ~4 bandwidth-bound ones (about 0.5%); 4 sigma and
    # a 2% bound hold for this fixed seed and show both the value and its error are right.
    fit = fit_alpha_beta(SIZES, _times(ALPHA_S, BANDWIDTH_BPS, 0.01, random.Random(7)))
    assert abs(fit.alpha_s - ALPHA_S) <= 4 * fit.alpha_err_s
    assert abs(fit.bandwidth_Bps - BANDWIDTH_BPS) <= 4 * fit.bandwidth_err_Bps
    assert fit.alpha_err_s / ALPHA_S < 0.02 and fit.bandwidth_err_Bps / BANDWIDTH_BPS < 0.02
    assert 0.004 < fit.rel_rms < 0.02  # about the noise


def test_alpha_beta_errors_are_one_sigma() -> None:
    # over 400 noisy draws the truth lies within 1 standard error about 68% of the time
    # (binomial sd 2.3%, so 0.58 .. 0.78 is over 4 sd wide)
    rng = random.Random(11)
    inside_alpha = inside_bw = 0
    for _ in range(400):
        fit = fit_alpha_beta(SIZES, _times(ALPHA_S, BANDWIDTH_BPS, 0.02, rng))
        inside_alpha += abs(fit.alpha_s - ALPHA_S) <= fit.alpha_err_s
        inside_bw += abs(fit.bandwidth_Bps - BANDWIDTH_BPS) <= fit.bandwidth_err_Bps
    assert 0.58 < inside_alpha / 400 < 0.78
    assert 0.58 < inside_bw / 400 < 0.78


def test_alpha_beta_weights_relative_error() -> None:
    # an unweighted fit would let the 1 GiB point dominate and miss alpha; here a 10% error on
    # the largest point moves alpha by well under 10%
    times = _times(ALPHA_S, BANDWIDTH_BPS, 0.0, random.Random(0))
    times[-1] *= 1.10
    fit = fit_alpha_beta(SIZES, times)
    assert abs(fit.alpha_s - ALPHA_S) / ALPHA_S < 0.02


def test_alpha_beta_two_points_fit_exactly_without_errors() -> None:
    fit = fit_alpha_beta([1e3, 1e9], [ALPHA_S + 1e3 / BANDWIDTH_BPS, ALPHA_S + 1e9 / BANDWIDTH_BPS])
    assert fit.alpha_s == pytest.approx(ALPHA_S, rel=1e-9)
    assert math.isnan(fit.alpha_err_s) and math.isnan(fit.bandwidth_err_Bps)


@pytest.mark.parametrize(("sizes", "times", "match"), [
    ([1e3], [1e-6], "at least 2 points"),
    ([], [], "at least 2 points"),
    ([1e3, 1e6], [1e-6], "2 sizes but 1 times"),
    ([1e3, 0], [1e-6, 2e-6], "sizes_bytes"),
    ([1e3, 1e6], [1e-6, -2e-6], "times_s"),
    ([1e3, 1e6], [1e-6, float("nan")], "times_s"),
    ([1e3, 1e3], [1e-6, 2e-6], "different sizes"),
    ([1e3, 1e6], [2e-6, 1e-6], "bandwidth not determined"),
])
def test_alpha_beta_rejects_bad_data(sizes: list[float], times: list[float], match: str) -> None:
    with pytest.raises(FitError, match=match):
        fit_alpha_beta(sizes, times)


BLOCKS = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 132]


def _rates(b_max: float, s: float, noise: float, rng: random.Random,
           blocks: list[int] = BLOCKS) -> list[float]:
    return [min(b_max * x / s, b_max) * (1 + noise * rng.gauss(0, 1)) for x in blocks]


def test_saturation_exact_data_is_recovered_exactly() -> None:
    fit = fit_saturation(BLOCKS, _rates(340e9, 80.0, 0.0, random.Random(0)))
    assert fit.plateau_Bps == pytest.approx(340e9, rel=1e-12)
    assert fit.saturate_at == pytest.approx(80.0, rel=1e-12)
    assert fit.rel_rms < 1e-12 and fit.note == ""
    assert fit.rate_Bps(40) == pytest.approx(170e9)


def test_saturation_knee_at_a_data_point() -> None:
    fit = fit_saturation([1, 2, 4, 8], [1.0, 2.0, 4.0, 4.0])
    assert (fit.plateau_Bps, fit.saturate_at, fit.note) == (4.0, 4.0, "")


@pytest.mark.parametrize("seed", range(5))
def test_saturation_noisy_data_is_recovered(seed: int) -> None:
    # 1% noise: the plateau averages 2 points (0.7%), s = B_max / slope with the slope from 9
    # rising points; 3% and 3 blocks hold for every seed here
    fit = fit_saturation(BLOCKS, _rates(340e9, 80.0, 0.01, random.Random(seed)))
    assert abs(fit.plateau_Bps / 340e9 - 1) < 0.03
    assert abs(fit.saturate_at - 80) < 3
    assert abs(fit.plateau_Bps - 340e9) <= 5 * fit.plateau_err_Bps
    assert fit.note == ""


def test_saturation_all_on_the_plateau_gives_an_upper_bound() -> None:
    fit = fit_saturation([96, 112, 132], _rates(340e9, 80.0, 0.01, random.Random(1),
                                                [96, 112, 132]))
    assert fit.saturate_at == 96 and "96 or fewer" in fit.note
    assert abs(fit.plateau_Bps / 340e9 - 1) < 0.02
    assert math.isnan(fit.saturate_at_err)


def test_saturation_without_a_plateau_gives_lower_bounds() -> None:
    fit = fit_saturation([1, 2, 4, 8, 16], _rates(340e9, 80.0, 0.01, random.Random(0),
                                                  [1, 2, 4, 8, 16]))
    assert fit.saturate_at == 16 and "lower bounds" in fit.note
    assert fit.plateau_Bps == pytest.approx(340e9 * 16 / 80, rel=0.03)


def test_saturation_needs_two_sides_of_two_points_for_a_knee() -> None:
    # one high point alone is noise, not a plateau: the rising model wins
    fit = fit_saturation([1, 2, 4, 8, 16], [1.0, 2.02, 3.96, 8.05, 15.7])
    assert "lower bounds" in fit.note


@pytest.mark.parametrize(("blocks", "rates"), [([1], [1.0]), ([1, 2], [1.0]), ([1, 0], [1, 1])])
def test_saturation_rejects_bad_data(blocks: list[float], rates: list[float]) -> None:
    with pytest.raises(FitError):
        fit_saturation(blocks, rates)


def test_robust_summary_is_median_and_mad_error() -> None:
    s = robust_summary([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.median == 3.0  # the outlier does not move it
    # MAD = median(|-2, -1, 0, 1, 97|) = 1; err = sqrt(pi/2) x 1.4826 x MAD / sqrt(5)
    assert s.err == pytest.approx(math.sqrt(math.pi / 2) * 1.4826 / math.sqrt(5), rel=1e-12)
    assert s.rel_spread == pytest.approx(1.4826 / 3)
    assert s.points == 5


def test_robust_summary_of_one_value_has_zero_error() -> None:
    s = robust_summary([2.5])
    assert (s.median, s.err, s.points) == (2.5, 0.0, 1)


def test_robust_summary_error_shrinks_with_points() -> None:
    rng = np.random.default_rng(3)
    few = robust_summary(list(1 + 0.05 * rng.standard_normal(10)))
    many = robust_summary(list(1 + 0.05 * rng.standard_normal(1000)))
    assert many.err < few.err / 5
    # for normal data the scaled MAD estimates sigma: 0.05
    assert many.rel_spread == pytest.approx(0.05, rel=0.1)


def test_robust_summary_rejects_empty_and_non_positive() -> None:
    with pytest.raises(FitError):
        robust_summary([])
    with pytest.raises(FitError):
        robust_summary([1.0, 0.0])
