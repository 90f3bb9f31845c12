"""Posterior draws of the residual DIF that carry the capability adjustment's uncertainty too: the
Bayesian bootstrap of an audit half (``bayes_method="bootstrap"``).

The default Bayesian layer (:func:`bayesirt.audit.bayes.posterior.fit_family_dif_posterior`) holds the
spectral offsets, K and the first purification rounds at their deterministic values, so its
posterior describes the DIF estimate alone. Here every draw s re-runs the whole estimator of the
anchors on a reweighted audit half, with K fixed at the fold's selected value:

    weights w^(s) -> working responses and rank-K spectral offsets (weighted SVD) -> NT's DIF
    Newton schedule (weighted deviance) -> cells and anchors, three purification rounds
    -> the last round's (delta^(s), b^(s)),

which :func:`bayesirt.audit.bayes.posterior.propagate_posterior` then carries through anchors, reversals and
the per-draw null exactly as it does draws of the ADVI posterior.

The weights are Rubin's (1981) Bayesian bootstrap, clustered by owner: owner g gets
omega_g ~ Dirichlet(1, ..., 1) and each of its models the weight omega_g scaled so that the
weights average 1 over the half's models. The draws are then the posterior of the estimator under
a nonparametric (Dirichlet-process limit) model of the population of owners, the unit the audit
already treats as independent (K selection holds out owners, the owner bootstrap resamples them).
A Dirichlet(1) weight is positive with probability one, so every model keeps a finite coordinate.

Each draw costs one purification (three weighted SVDs and DIF fits) of the audit half: the
draws are spread over the ``workers`` of :func:`bayesirt.utils.parallel.parallel_map`, and every
draw's weights and SVD seed come from the fold's seed, so results do not depend on the workers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesirt.audit.engine.anchors import ANCHOR_FRACTION, purification_rounds
from bayesirt.errors import DataError
from bayesirt.utils.parallel import parallel_map
from bayesirt.utils.validation import check_int

__all__ = ["owner_dirichlet_weights", "bootstrap_draws", "BOOTSTRAP_DRAWS"]

#: Default number of bootstrap draws per fold.
BOOTSTRAP_DRAWS = 100


def owner_dirichlet_weights(owner, draws: int, seed: int) -> np.ndarray:
    """Model weights (draw, model) of the owner-clustered Bayesian bootstrap (module notes).

    Parameters
    ----------
    owner : array_like, shape (model,)
        Owner label of every model of the audit half.
    draws : int
    seed : int
        Seed of ``numpy.random.default_rng``; draw s uses the s-th row of one (draw, owner) block of
        Dirichlet(1) variates, so the first draws do not depend on how many are asked for.

    Returns
    -------
    ndarray (draw, model): positive weights whose mean over models is 1 in every draw.
    """
    codes, owners = pd.factorize(np.asarray(owner))
    if codes.size == 0 or np.any(codes < 0):
        raise DataError("owner must be a non-empty 1-D array of labels without missing values")
    rng = np.random.default_rng(seed)
    gamma = np.vstack([rng.standard_exponential(owners.size) for _ in range(draws)])  # Dirichlet(1) up to scale
    per_model = gamma[:, codes]
    return per_model / per_model.mean(axis=1, keepdims=True)


def _draw(task: dict) -> tuple[np.ndarray, np.ndarray, int]:
    _, _, _, fit, _ = purification_rounds(task["y"], task["observed"], task["family"], task["n_families"],
                                          task["item_group"], task["k"], anchor_fraction=task["anchor_fraction"], seed=task["seed"],
                                          weights=task["weights"])
    return fit.family_effect, fit.easiness, fit.newton_capped


def bootstrap_draws(y, observed, family, n_families: int, item_group, k: int, owner, *, draws: int = BOOTSTRAP_DRAWS,
                    anchor_fraction: float = ANCHOR_FRACTION, seed: int = 0, svd_seed: int = 0, workers: int | None = 1,
                    progress: bool = False, return_info: bool = False) -> tuple:
    """Bayesian-bootstrap draws of the last purification round's (delta, b) in one audit half.

    Parameters
    ----------
    y, observed : ndarray (item, model)
        The audit half's responses and observed mask.
    family : ndarray of int (model,)
    n_families : int
    item_group : ndarray (item,)
    k : int
        The fold's selected dimension, held fixed.
    owner : array_like (model,)
        Owner labels: the bootstrap's clusters.
    draws : int, default :data:`BOOTSTRAP_DRAWS`
    anchor_fraction : float
        Anchor fraction of the purification rounds.
    seed : int
        Seed of the weights (:func:`owner_dirichlet_weights`).
    svd_seed : int
        Seed of the randomized SVDs (the deterministic purification's, so the weights are the only
        difference).
    workers : int, optional
        As :func:`bayesirt.utils.parallel.parallel_map`; results do not depend on it.
    progress : bool, default False
    return_info : bool, default False
        Also return a dict with ``newton_capped`` (draw,): the inner Newton solves of each draw's
        last-round DIF fit that stopped at their step cap (:attr:`bayesirt.audit.engine.dif.DIFFit.newton_capped`).

    Returns
    -------
    (family_effect, easiness) : ndarray (draw, item, family), ndarray (draw, item)
        The inputs of :func:`bayesirt.audit.bayes.posterior.propagate_posterior` (and the dict, with
        ``return_info``).
    """
    check_int(draws, name="draws", caller="bootstrap_draws", low=1)
    y, observed = np.asarray(y), np.asarray(observed, dtype=bool)
    weights = owner_dirichlet_weights(owner, draws, seed)
    if weights.shape[1] != y.shape[1]:
        raise DataError(f"owner labels {weights.shape[1]} models but the responses hold {y.shape[1]}")
    common = {"y": y, "observed": observed, "family": np.asarray(family), "n_families": n_families,
              "item_group": np.asarray(item_group), "k": k, "anchor_fraction": anchor_fraction, "seed": svd_seed}
    results = parallel_map(_draw, [common | {"weights": w} for w in weights], workers=workers, progress=progress,
                           description="bootstrap draws")
    delta, easiness = np.stack([r[0] for r in results]), np.stack([r[1] for r in results])
    if return_info:
        return delta, easiness, {"newton_capped": np.array([r[2] for r in results], dtype=np.int64)}
    return delta, easiness
