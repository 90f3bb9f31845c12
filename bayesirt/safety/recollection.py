"""Detector cut-offs that hold on a re-collected run: calibration on simulated re-collections, and
out-of-sample false-positive rates by cross-fitting (issue 44 item 2).

An honest model asked the same items again does not answer exactly as before: SAFE App. B measures
a median self-disagreement of 2.8% of cells between repeated collections
(:data:`~bayesirt.safety.settings.FLIP_RATE`). A cut-off set on the cohort's own history (the
history scored against itself: its 40-item re-test is a subset of it, its person fit the data the
ability was fitted to) flags far more than its stated rate of such honest re-runs (issue 44: person
fit 33% at a stated 10%, shift 7.5% at an AUC of 1.000 against itself). Here:

- :func:`recollect`: a simulated honest re-collection, each observed cell flipped independently
  with probability ``flip_rate`` (the stated self-disagreement rate; missing cells stay missing);
- :func:`calibrate_null`: the person-fit cut-off (``statistic <= c`` flags) and the shift
  multiplier (``|shift| > m * gap`` flags) that flag ``fpr`` of the genuine cohort's re-collected
  runs (:func:`bayesirt.safety.personfit.calibrate_cutoff`), and the *cross-fitted* rates: the
  cohort is cut into ``folds`` seeded folds, each fold's runs are flagged at the cut-offs
  calibrated on the other folds, and the share flagged over all folds is the out-of-sample
  false-positive rate a new honest model would meet.

``null="in_sample"`` keeps SAFE's calibration on the history itself (cut-off on the cohort's own
person fit, shift beyond one resolvable gap); every report says which null its rates come from.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayesirt.errors import DataError
from bayesirt.safety.personfit import calibrate_cutoff
from bayesirt.safety.settings import CALIBRATION_NULLS, FLIP_RATE
from bayesirt.utils.validation import check_int

__all__ = ["recollect", "calibrate_null", "NullCalibration", "describe_null", "CALIBRATION_NULLS", "FLIP_RATE"]


def recollect(y: np.ndarray, flip_rate: float, rng: np.random.Generator) -> np.ndarray:
    """An honest re-collection of ``y`` ((item, model), 1 / 0 / -1 missing): each observed cell flips
    with probability ``flip_rate``, independently."""
    y = np.asarray(y)
    flip = (y >= 0) & (rng.random(y.shape) < flip_rate)
    return np.where(flip, 1 - y, y).astype(np.int8)


class NullCalibration(NamedTuple):
    """Cut-offs from genuine re-collected runs and their cross-fitted false-positive rates."""

    personfit: float
    shift: float
    crossfit: dict


def _cuts(lz: np.ndarray, ratio: np.ndarray, fpr: float) -> tuple[float, float]:
    return calibrate_cutoff(lz, fpr=fpr), -calibrate_cutoff(-ratio, fpr=fpr)


def calibrate_null(lz, ratio, *, fpr: float, folds: int = 5, seed: int = 0) -> NullCalibration:
    """Person-fit cut-off and shift multiplier flagging ``fpr`` of the genuine runs (module docstring).

    Parameters
    ----------
    lz : array_like, shape (n_models,)
        Person-fit statistic of each genuine (re-collected) run; low is suspicious.
    ratio : array_like, shape (n_models,)
        ``|shift| / gap`` of each genuine run (its short-test ability minus its history, over the
        gap the test resolves there).
    fpr : float
        Stated false-positive rate of each detector.
    folds : int, default 5
        Cross-fitting folds (at least 2; each must hold ``1 / fpr`` runs of the others).
    seed : int, default 0
        Seeds the fold assignment.

    Returns
    -------
    NullCalibration
        ``personfit`` (flag ``lz <= personfit``), ``shift`` (flag ``ratio > shift``) and ``crossfit``:
        the out-of-sample shares flagged by ``personfit``, ``shift`` and ``combined`` (either).
    """
    lz, ratio = np.asarray(lz, dtype=float), np.asarray(ratio, dtype=float)
    if lz.shape != ratio.shape or lz.ndim != 1:
        raise DataError("lz and ratio must be 1-D arrays over the same genuine runs")
    n = lz.size
    check_int(folds, name="folds", caller="calibrate_null", low=2, high=n)  # cross-fitting folds of the cohort
    fold = np.random.default_rng(seed).permutation(n) % folds
    flags = np.zeros((3, n), dtype=bool)
    for f in range(folds):
        held = fold == f
        cut_lz, cut_ratio = _cuts(lz[~held], ratio[~held], fpr)
        flags[0, held], flags[1, held] = lz[held] <= cut_lz, ratio[held] > cut_ratio
    flags[2] = flags[0] | flags[1]
    cut_lz, cut_ratio = _cuts(lz, ratio, fpr)
    crossfit = dict(zip(("personfit", "shift", "combined"), map(float, flags.mean(axis=1)), strict=True))
    return NullCalibration(float(cut_lz), float(cut_ratio), crossfit)


def describe_null(null: str, flip_rate: float, folds: int) -> str:
    """The sentence a report gives for where its false-positive rates come from."""
    if null == "in_sample":
        return ("in-sample: cut-offs set on the cohort's own history (an exact re-run); honest re-collections "
                "disagree with themselves (SAFE App. B: median 2.8% of cells) and are flagged more often")
    return (f"simulated re-collections: every genuine model re-run with {flip_rate:.1%} of its cells flipped at "
            f"random (the stated self-disagreement rate); cut-offs flag the stated rate of those runs, and the "
            f"out-of-sample rates are cross-fitted over {folds} folds of the reference cohort")
