"""Shared pieces of the posterior diagnostics (:mod:`bayesirt.audit.bayes.diagnostics`): posterior
summaries of per-draw statistics, draws moved between point estimates, per-draw reversal counts."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import xarray as xr

from bayesirt.audit.bayes.posterior import INTERVAL
from bayesirt.audit.engine.ranking import reversal_counts
from bayesirt.audit.engine.result import BAYES_CONTROLS
from bayesirt.errors import DataError

__all__ = ["POSTERIOR_CONTROLS", "QUANTILES", "DRAW_BLOCK", "describe", "shifted_draws", "draw_counts", "chain_counts",
           "check_chains"]


#: Discrimination-matched controls drawn per posterior draw and fold (module notes; the default of
#: ``AuditConfig.bayes_controls``).
POSTERIOR_CONTROLS = BAYES_CONTROLS


_TAIL = (1 - INTERVAL) / 2


#: Posterior quantiles reported (the coordinates of :func:`bayesirt.audit.bayes.posterior.pool_folds`).
QUANTILES = [_TAIL, 0.5, 1 - _TAIL]


DRAW_BLOCK = 25  # posterior draws per parallel task of the matched controls (results do not depend on it)


def describe(ds: xr.Dataset, names: Sequence[str]) -> xr.Dataset:
    """Add the posterior summaries of every per-draw variable in ``names`` (dims ``draw``, ...).

    For a variable ``v``: ``v_mean``, ``v_quantiles`` (``quantile``: :data:`QUANTILES`, linear
    interpolation), ``prob_v_positive`` (share of defined draws above 0) and ``v_undefined`` (NaN
    draws, left out of the rest). Statistics without a defined draw are NaN.
    """
    out = ds.assign_coords(quantile=QUANTILES)
    for name in names:
        x = ds[name].transpose("draw", ...)
        values = x.values.astype(np.float64)
        defined = ~np.isnan(values)
        count = defined.sum(axis=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices give NaN, as documented
            mean = np.nanmean(values, axis=0)
            quantiles = np.nanquantile(values, QUANTILES, axis=0)
        positive = np.where(count > 0, (values > 0).sum(axis=0) / np.maximum(count, 1), np.nan)
        rest = x.dims[1:]
        out[f"{name}_mean"] = (rest, mean)
        out[f"{name}_quantiles"] = (("quantile", *rest), quantiles)
        out[f"prob_{name}_positive"] = (rest, positive)
        out[f"{name}_undefined"] = (rest, values.shape[0] - count)
    return out


def shifted_draws(draws: xr.Dataset, reference, target) -> tuple[np.ndarray, np.ndarray]:
    """Posterior draws moved from one point estimate to another (module notes).

    Parameters
    ----------
    draws : xarray.Dataset
        ``family_effect`` (draw, item, family) and ``easiness`` (draw, item): a fold's
        :attr:`~bayesirt.audit.engine.result.FoldResult.draws`.
    reference, target : DIFFit
        The fit the posterior is centred on (the purification's ``selection_fit``) and the one the
        diagnostic reads.

    Returns
    -------
    (family_effect, easiness) : ndarray (draw, item, family), ndarray (draw, item)
        ``(draw - reference) + target``: equal to ``target`` for a draw equal to ``reference``.
    """
    delta = draws["family_effect"].transpose("draw", "item", "family").values
    b = draws["easiness"].transpose("draw", "item").values
    return (delta - reference.family_effect) + target.family_effect, (b - reference.easiness) + target.easiness


def draw_counts(chains: Sequence[xr.Dataset], pair_sets: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """Eligible and reversed counts (fold, draw) of each fold's ``pair_sets[h]`` under its
    per-draw anchor scores."""
    counts = [reversal_counts(c["full_score"].values, c["anchor_score"].transpose("draw", "model").values, pairs)
              for c, pairs in zip(chains, pair_sets, strict=True)]
    return np.stack([c[0] for c in counts]), np.stack([c[1] for c in counts])


def chain_counts(chains: Sequence[xr.Dataset]) -> tuple[np.ndarray, np.ndarray]:
    return (np.stack([c["n_eligible"].values for c in chains]), np.stack([c["n_reversed"].values for c in chains]))


def check_chains(chains, caller: str) -> None:
    if len(chains) == 0 or not all(isinstance(c, xr.Dataset) and {"anchor_score", "full_score", "n_eligible",
                                                                   "n_reversed"} <= set(c.data_vars) for c in chains):
        raise DataError(f"{caller} needs the propagate_posterior Dataset of every fold (FoldResult.posterior of an "
                        "audit run with bayes=True)")
    sizes = {c.sizes["draw"] for c in chains}
    if len(sizes) != 1:
        raise DataError(f"every fold must hold the same number of draws to pair them; got {sorted(sizes)}")
