"""Spectral MIRT working model and nested selection of its dimension (NT App. C.2, C.3).

The working model approximates the multidimensional item x model term of a compensatory MIRT by
a rank-K reconstruction of standardized responses; it is a fast nuisance adjustment, not a
maximum-likelihood MIRT calibration.

- Working responses (eq. 13-14): p_i = (sum_m Y_im + 1/2) / (M_i + 1), s_i = sqrt(p_i (1 - p_i)),
  X_im = (Y_im - p_i) / s_i, with M_i the models observing item i. A missing cell gets X = 0, the
  item's mean: it adds nothing to the decomposition.
- Decomposition (eq. 15-18): randomized SVD of the rows S (the items fitting the coordinates),
  X_S ~ U_K Sigma_K V_K^T (scikit-learn, 5 power iterations); coordinates Theta = V_K, loadings of
  every item by projection L = X Theta, offsets o_im = clip(L_i Theta_m / s_i, -6, 6).
- Dimension selection (eq. 19-24): inside an audit half, 25% of its owners (at least one, and at
  least one left) are held out; the rest fit one SVD at the largest feasible K, truncated for the
  smaller K. Each item group is split at random into coordinate-calibration items C (the larger
  half) and evaluation items E. A held-out model's coordinates are the ridge fit (lambda = 1) of
  its C responses on F = U Sigma; its held-out loss is the mean Bernoulli log loss over its E
  items of logit(p_i) + clip(F_i theta_m / s_i, -6, 6). K* is the smallest K whose mean loss is
  within one standard error (sd over held-out models / sqrt(count)) of the best (one-SE rule),
  over the grid {1, 2, 4, ..., 256} limited to K <= min(items, training models).
- Model weights (the Bayesian bootstrap, :mod:`bayesirt.audit.bayes.bootstrap`): frequency weights
  w_m enter p_i as weighted counts and the decomposition as the weighted rank-K least-squares fit,
  the SVD of X W^(1/2): coordinates Theta_m = V_m / sqrt(w_m), loadings L = X W^(1/2) V, so
  L Theta_m is model m's column of the weighted reconstruction (integer weights: the fit with
  model m repeated w_m times).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import logit
from sklearn.utils.extmath import randomized_svd

from bayesirt.errors import DataError, warn

__all__ = ["K_GRID", "MAX_OFFSET", "SVD_POWER_ITERATIONS", "COORDINATE_RIDGE", "VALIDATION_SHARE",
           "working_responses", "spectral_loadings", "spectral_offsets", "nested_split", "NestedSplit",
           "select_dimension", "DimensionSelection"]

K_GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""Candidate dimensions (NT C.3)."""
MAX_OFFSET = 6.0
"""Offsets are clipped to +/- this many logits (eq. 18)."""
SVD_POWER_ITERATIONS = 5
COORDINATE_RIDGE = 1.0
"""lambda_theta of eq. 20."""
VALIDATION_SHARE = 0.25
"""Share of an audit half's owners held out to select K."""


def working_responses(y: np.ndarray, observed: np.ndarray,
                      weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Standardized working responses of eq. 13-14.

    Parameters
    ----------
    y : ndarray (item, model)
        1 correct, 0 otherwise (the value of a missing cell is ignored).
    observed : ndarray of bool (item, model)
    weights : ndarray (model,), optional
        Frequency weights of the models in p (module docstring).

    Returns
    -------
    X : ndarray (item, model), float64, 0 in missing cells
    p : ndarray (item,), the smoothed success probability
    s : ndarray (item,), sqrt(p (1 - p))
    """
    if weights is None:
        correct = np.where(observed, y, 0).sum(axis=1, dtype=np.float64)
        count = observed.sum(axis=1)
    else:
        correct = np.where(observed, y, 0) @ weights
        count = observed @ weights
    p = (correct + 0.5) / (count + 1.0)
    s = np.sqrt(p * (1.0 - p))
    x = np.where(observed, (y - p[:, None]) / s[:, None], 0.0)
    return x, p, s


def _svd(x: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return randomized_svd(x, n_components=k, n_iter=SVD_POWER_ITERATIONS, random_state=seed)


def spectral_loadings(x: np.ndarray, fit_items: np.ndarray, k: int, *, seed: int,
                      weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Loadings L (item, k) of every item and coordinates Theta (model, k) from a rank-k
    decomposition of the rows ``fit_items`` (eq. 15-17; weighted by positive model ``weights``
    as in the module docstring); ``k`` is lowered to ``min(k, rows, models)`` when the rows
    cannot carry it (read it from the shapes)."""
    if weights is not None:
        root = np.sqrt(weights)
        loading, v = spectral_loadings(x * root, fit_items, k, seed=seed)
        return loading, v / root[:, None]
    rows = x[fit_items]
    k = int(min(k, *rows.shape))
    _, _, vt = _svd(rows, k, seed)
    theta = vt.T
    return x @ theta, theta  # every item's loading, by projection


def spectral_offsets(x: np.ndarray, s: np.ndarray, fit_items: np.ndarray, k: int, *, seed: int,
                     weights: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Capability offsets o = clip(L Theta^T / s, -6, 6) (item, model) of eq. 18, with the rank used
    (``weights``: :func:`spectral_loadings`)."""
    loading, theta = spectral_loadings(x, fit_items, k, seed=seed, weights=weights)
    return np.clip((loading @ theta.T) / s[:, None], -MAX_OFFSET, MAX_OFFSET), theta.shape[1]


@dataclass(frozen=True)
class DimensionSelection:
    """Result of :func:`select_dimension`: the selected ``k``, the best-loss ``k_best`` and a
    ``table`` with one row per candidate K (mean held-out loss, its SE, selected)."""

    k: int
    k_best: int
    table: pd.DataFrame
    validation_owners: tuple[str, ...]


def _split_owners(owner: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Held-out mask over models: the first rounded 25% of the permuted unique owners, bounded
    to leave at least one owner on each side."""
    owners = np.unique(owner)
    if owners.size < 2:
        raise DataError(f"an audit half has {owners.size} owner; selecting K needs at least 2 (one held out): "
                        "add models from more owners or lower the owner cap's effect by supplying owners")
    n_val = int(np.clip(np.rint(VALIDATION_SHARE * owners.size), 1, owners.size - 1))
    held = rng.permutation(owners)[:n_val]
    return np.isin(owner, held)


def _split_items(item_group: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Coordinate-calibration mask: within each item group a random larger half."""
    calibrate = np.zeros(item_group.size, bool)
    for group in pd.unique(item_group):
        members = rng.permutation(np.flatnonzero(item_group == group))
        calibrate[members[: (members.size + 1) // 2]] = True
    return calibrate


@dataclass(frozen=True)
class NestedSplit:
    """The nested split of one audit half shared by every K-selection rule (NT C.3): held-out
    owners' models ``held``, coordinate-calibration items ``calibrate``, the ``feasible`` K and
    the held-out evaluation cells ``y_e``, ``obs_e`` (evaluation items x held-out models)."""

    held: np.ndarray
    calibrate: np.ndarray
    feasible: list[int]
    y_e: np.ndarray
    obs_e: np.ndarray

    def loss(self, k: int, xi: np.ndarray) -> dict:
        """Mean held-out Bernoulli log loss of the logits ``xi`` (eq. 22) and its SE (eq. 23)."""
        n_e = self.obs_e.sum(axis=0)
        loss = np.where(self.obs_e, np.logaddexp(0.0, xi) - self.y_e * xi, 0.0).sum(axis=0) / np.maximum(n_e, 1)
        loss = loss[n_e > 0]
        return {"k": k, "mean_loss": loss.mean(), "se": loss.std(ddof=1) / np.sqrt(loss.size), "models": loss.size}

    def select(self, rows: list[dict], owner: np.ndarray) -> DimensionSelection:
        """The one-SE rule (eq. 24): the smallest K whose mean loss is within one SE of the best."""
        table = pd.DataFrame(rows)
        best = int(table["mean_loss"].idxmin())
        bound = table.at[best, "mean_loss"] + table.at[best, "se"]
        chosen = int(table.index[table["mean_loss"] <= bound][0])
        table["selected"] = table.index == chosen
        return DimensionSelection(k=int(table.at[chosen, "k"]), k_best=int(table.at[best, "k"]), table=table,
                                  validation_owners=tuple(np.unique(np.asarray(owner)[self.held]).tolist()))


def nested_split(y: np.ndarray, observed: np.ndarray, owner: np.ndarray, item_group: np.ndarray,
                 rng: np.random.Generator, *, grid: tuple[int, ...] = K_GRID, max_k: int | None = None) -> NestedSplit:
    """Hold out 25% of the owners and split every item group into calibration and evaluation
    items (draws the owner permutation, then the item split, from ``rng``); check that K can be
    selected at all."""
    held = _split_owners(np.asarray(owner), rng)
    calibrate = _split_items(np.asarray(item_group), rng)
    if calibrate.all():
        raise DataError("every item group has a single item, so no item is left to evaluate K on: "
                        "supply coarser item groups")
    ceiling = min(y.shape[0], int((~held).sum()))
    feasible = [k for k in grid if k <= ceiling and (max_k is None or k <= max_k)]
    if not feasible:
        raise DataError(f"no candidate K fits a {y.shape[0]} items x {(~held).sum()} models training matrix; "
                        "the audit half needs more models")
    if max_k is not None and max_k > ceiling:
        warn(f"max_k = {max_k} is above the rank a {y.shape[0]} items x {(~held).sum()} models training "
             f"matrix supports ({ceiling}); K is chosen from {feasible}", UserWarning)
    y_e, obs_e = y[~calibrate][:, held], observed[~calibrate][:, held]
    n_seen = int((obs_e.sum(axis=0) > 0).sum())
    if n_seen < 2:
        raise DataError(f"{n_seen} held-out model(s) observe an evaluation item; selecting K needs at least 2: "
                        "add models or owners to the audit half")
    return NestedSplit(held=held, calibrate=calibrate, feasible=feasible, y_e=y_e, obs_e=obs_e)


def select_dimension(y: np.ndarray, observed: np.ndarray, owner: np.ndarray, item_group: np.ndarray, *,
                     seed: int, grid: tuple[int, ...] = K_GRID, max_k: int | None = None) -> DimensionSelection:
    """Nested owner- and item-held-out selection of K in one audit half (NT C.3).

    Parameters
    ----------
    y, observed : ndarray (item, model)
        The audit half's responses.
    owner : ndarray (model,)
    item_group : ndarray (item,)
    seed : int
        Seeds the owner permutation, the item split and the randomized SVD.
    grid : tuple of int
        Candidate K (default NT's ``K_GRID``).
    max_k : int, optional
        Drop candidates above this (``--quick`` uses 32).

    Returns
    -------
    DimensionSelection
    """
    rng = np.random.default_rng(seed)
    split = nested_split(y, observed, owner, item_group, rng, grid=grid, max_k=max_k)
    held, calibrate = split.held, split.calibrate
    x_train, p, s = working_responses(y[:, ~held], observed[:, ~held])
    u, sigma, _ = _svd(x_train, max(split.feasible), int(rng.integers(2**31)))
    factor = u * sigma  # F = U Sigma (eq. 19), truncated below per K
    x_val = np.where(observed[:, held], (y[:, held] - p[:, None]) / s[:, None], 0.0)
    evaluate = ~calibrate
    base = logit(p)[evaluate, None]
    rows = []
    for k in split.feasible:
        f_c = factor[calibrate, :k]
        theta = np.linalg.solve(f_c.T @ f_c + COORDINATE_RIDGE * np.eye(k), f_c.T @ x_val[calibrate])  # eq. 20
        xi = base + np.clip(factor[evaluate, :k] @ theta / s[evaluate, None], -MAX_OFFSET, MAX_OFFSET)  # eq. 21
        rows.append(split.loss(k, xi))
    return split.select(rows, owner)
