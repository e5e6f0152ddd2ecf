"""The statistics of the report: the 95% Student-t interval of a mean over runs, reciprocal
ranks, and the draws of the paired seed bootstrap (:func:`pebench.analysis.leaderboards.overall`)."""

from __future__ import annotations

import functools

import numpy as np
from scipy import stats

BOOTSTRAP_RESAMPLES = 1000


BOOTSTRAP_SEED = 0


CONFIDENCE = 0.95


@functools.cache
def _t_quantile(degrees_of_freedom: int) -> float:
    return float(stats.t.ppf((1 + CONFIDENCE) / 2, degrees_of_freedom))


def interval(values) -> float:
    """Half-width of the 95% Student-t interval of the mean of ``values`` (NaN below two; NaN
    values are left out): t(0.975, n - 1) * s / sqrt(n), s the sample standard deviation."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if len(values) < 2:
        return float("nan")
    return float(_t_quantile(len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))


def reciprocal_ranks(scores: np.ndarray) -> np.ndarray:
    """scores ``[..., encodings]`` (NaN: not ranked) -> 1 / rank among the ranked (higher score
    first, ties sharing the mean rank), 0 where not ranked."""
    ranks = stats.rankdata(np.where(np.isnan(scores), np.inf, -scores), method="average", axis=-1)
    return np.where(np.isnan(scores), 0.0, 1.0 / ranks)


def seed_draws(seeds: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``[B, len(seeds)]``: how many times each of a task's seeds is drawn in each of
    :data:`BOOTSTRAP_RESAMPLES` resamples of its seeds with replacement."""
    draws = rng.integers(0, len(seeds), (BOOTSTRAP_RESAMPLES, len(seeds)))
    return (draws[:, :, None] == np.arange(len(seeds))).sum(axis=1)
