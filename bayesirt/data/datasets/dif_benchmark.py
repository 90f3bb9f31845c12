"""A synthetic benchmark with planted family DIF, for testing the family-DIF near-tie audit.

Each of ``n_owners`` owners uploads ``models_per_owner_family`` checkpoints of every family,
so families are crossed with owners as in the NT population (App. C.1). Responses follow a
compensatory multidimensional logistic model plus an item x family effect on a known subset
of items:

    P(Y_im = 1) = sigmoid(b_i + a_i . theta_m + delta_{i, f(m)}).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr
from scipy.special import expit

from bayesirt.data.families import FAMILIES
from bayesirt.data.responses import MISSING, make_responses
from bayesirt.errors import ConfigError, DataError
from bayesirt.utils.options import declare, option
from bayesirt.utils.validation import parameter_error

__all__ = ["simulate_dif_benchmark", "plant_family_advantage"]

_FAMILY_MEAN_SD = 0.3  # sd of each family's ability mean, per dimension
_OWNER_SD = 0.5  # sd of each owner's ability effect, per dimension


def _bad(name: str, what: str, value: Any) -> ConfigError:
    return parameter_error(name, "simulate_dif_benchmark", what, value)


def _rules(v: dict) -> str | None:
    """The rules across :func:`simulate_dif_benchmark`'s options."""
    names = () if isinstance(v["families"], str) else tuple(v["families"])
    if len(names) < 2 or len(set(names)) != len(names) or not set(names) <= set(FAMILIES):
        raise _bad("families", f"at least 2 distinct names from {FAMILIES}", v["families"])
    if v["n_groups"] > v["n_items"]:
        raise _bad("n_groups", f"at most n_items={v['n_items']}", v["n_groups"])
    return None


@declare(check=_rules)
def simulate_dif_benchmark(
    *,
    n_owners: int = option(100, "owners, each with one model per family (times models_per_owner_family)", low=1),
    families: Sequence[str] = option(("Qwen", "Llama", "Gemma"), "families (NT C.1 names)"),
    models_per_owner_family: int = option(1, "checkpoints per owner and family", low=1),
    n_items: int = option(400, "items", low=2),
    n_groups: int = option(4, "item groups (interleaved)", low=1),
    n_dims: int = option(3, "latent abilities of the generator", low=1),
    dif_fraction: float = option(0.5, "share of items with planted family DIF", low=0, high=1),
    dif_sd: float = option(0.8, "SD of the planted family effects (logits)", low=0),
    missing: float = option(0.0, "share of cells missing at random", low=0, high=1, open="high"),
    seed: int = option(0, "random seed", low=0),
) -> tuple[xr.Dataset, dict[str, Any]]:
    """Simulate a benchmark with planted family DIF on a known random subset of items.

    Generative model, drawn from ``np.random.default_rng(seed)`` in this order:

    - family ability means ``mu_f ~ Normal(0, 0.3^2 I)`` and owner effects
      ``u_o ~ Normal(0, 0.5^2 I)`` (``n_dims`` each); ``theta_m ~ Normal(mu_f(m) + u_o(m), I)``;
    - loadings ``a_i``: ``|Normal(0.9, 0.3^2)|`` on dimension 0 (a shared, positive ability),
      ``Normal(0, 0.4^2)`` on the others; easiness ``b_i ~ Normal(0, 1)``;
    - ``round(dif_fraction * n_items)`` DIF items chosen at random; on them
      ``delta_{i,f} ~ Normal(0, dif_sd^2)`` then centred within the item (sum over families 0,
      so its variance is ``dif_sd^2 (F - 1) / F``); ``delta = 0`` on clean items;
    - ``Y_im ~ Bernoulli(sigmoid(b_i + a_i . theta_m + delta_{i,f(m)}))``;
    - each cell missing independently with probability ``missing`` (drawn last, so the complete
      responses of a seed do not depend on ``missing``); a model or item left without any
      observed cell gets one random cell back.

    Parameters
    ----------
    n_owners : int
        Number of owners; each has ``models_per_owner_family`` checkpoints of every family.
    families : sequence of str
        At least 2 distinct names from ``FAMILIES``. Default ``("Qwen", "Llama", "Gemma")``.
    models_per_owner_family : int
        Checkpoints per owner and family. Default 1 (as in the NT generator).
    n_items : int
        Number of items (at least 2).
    n_groups : int
        Number of interleaved item groups: item ``i`` is in group ``f"g{i % n_groups}"``.
    n_dims : int
        Number of ability dimensions.
    dif_fraction : float
        Share of items carrying family DIF, in [0, 1].
    dif_sd : float
        Standard deviation of the planted family effects before centring (>= 0).
    missing : float
        Probability that a cell is missing, in [0, 1).
    seed : int
        Seed of :func:`numpy.random.default_rng`; the global NumPy seed is never used.

    Returns
    -------
    responses : xarray.Dataset
        From :func:`~bayesirt.data.make_responses`, named ``"simulated DIF benchmark"``; models
        ordered by owner, family, checkpoint with ids ``f"owner{o:04d}/{family}-ckpt-{j}"``
        (a ``/`` inside a family name becomes ``-``), so ``derive_family`` and
        ``derive_owner`` recover the truth; item ids ``f"item{i:05d}"``.
    truth : dict
        NumPy arrays in Dataset order: ``dif_items`` (bool, item), ``family_effect`` (item,
        family), ``dif_range`` (item; max minus min of ``family_effect`` over families),
        ``easiness`` (item), ``loading`` (item, dim), ``theta`` (model, dim); and ``families``
        (tuple of str, the column order of ``family_effect``).

    Examples
    --------
    >>> ds, truth = simulate_dif_benchmark(n_owners=10, n_items=40, seed=1)
    >>> ds["responses"].shape, truth["family_effect"].shape
    ((40, 30), (40, 3))
    """
    families = tuple(families)

    n_fam = len(families)
    owner = np.repeat(np.arange(n_owners), n_fam * models_per_owner_family)
    family = np.tile(np.repeat(np.arange(n_fam), models_per_owner_family), n_owners)
    ckpt = np.tile(np.arange(models_per_owner_family), n_owners * n_fam)
    n_models = owner.size

    rng = np.random.default_rng(seed)
    family_mean = rng.normal(0.0, _FAMILY_MEAN_SD, (n_fam, n_dims))
    owner_effect = rng.normal(0.0, _OWNER_SD, (n_owners, n_dims))
    theta = family_mean[family] + owner_effect[owner] + rng.normal(0.0, 1.0, (n_models, n_dims))
    loading = rng.normal(0.0, 0.4, (n_items, n_dims))
    loading[:, 0] = np.abs(rng.normal(0.9, 0.3, n_items))
    easiness = rng.normal(0.0, 1.0, n_items)
    dif_items = np.zeros(n_items, dtype=bool)
    dif_items[rng.choice(n_items, size=int(round(dif_fraction * n_items)), replace=False)] = True
    raw = rng.normal(0.0, dif_sd, (n_items, n_fam))
    family_effect = np.where(dif_items[:, None], raw - raw.mean(axis=1, keepdims=True), 0.0)
    p = expit(easiness[:, None] + loading @ theta.T + family_effect[:, family])
    y = (rng.random((n_items, n_models)) < p).astype(np.int8)
    if missing > 0:
        gone = rng.random((n_items, n_models)) < missing
        rows = np.flatnonzero(gone.all(axis=1))
        gone[rows, rng.integers(n_models, size=rows.size)] = False
        cols = np.flatnonzero(gone.all(axis=0))
        gone[rng.integers(n_items, size=cols.size), cols] = False
        y[gone] = MISSING

    names = [f.replace("/", "-") for f in families]
    ds = make_responses(
        y,
        item_id=[f"item{i:05d}" for i in range(n_items)],
        model_id=[f"owner{o:04d}/{names[f]}-ckpt-{j}" for o, f, j in zip(owner, family, ckpt, strict=True)],
        item_group=[f"g{i % n_groups}" for i in range(n_items)],
        name="simulated DIF benchmark",
        source=(
            f"bayesirt.data.simulate_dif_benchmark(n_owners={n_owners}, families={families}, "
            f"models_per_owner_family={models_per_owner_family}, n_items={n_items}, n_groups={n_groups}, "
            f"n_dims={n_dims}, dif_fraction={dif_fraction}, dif_sd={dif_sd}, missing={missing}, seed={seed})"
        ),
    )
    truth = {
        "dif_items": dif_items,
        "family_effect": family_effect,
        "dif_range": family_effect.max(axis=1) - family_effect.min(axis=1),
        "easiness": easiness,
        "loading": loading,
        "theta": theta,
        "families": families,
    }
    return ds, truth


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def plant_family_advantage(responses: xr.Dataset, family: str, *, share: float = 0.4, strength: float = 0.9,
                           seed: int = 0) -> tuple[xr.Dataset, np.ndarray]:
    """Give one family an advantage on a random share of the items: DIF in one direction.

    On each chosen item, every observed wrong answer of a model of ``family`` becomes right with
    probability ``strength``. Unlike the zero-sum ``delta`` of :func:`simulate_dif_benchmark`,
    whose per-item effects partly cancel in a family's score, this shifts the family's full
    scores up, so the low-DIF recomposition (which drops these items) reverses near-tie pairs
    in one direction: the planted signal of the calibration study
    (``benchmarks/bayes_calibration.py``). Returns the new Dataset and the boolean mask of the
    chosen items.
    """
    if family not in set(responses["family"].values.astype(str)):
        raise DataError(f"family {family!r} is not in the data; pick one of "
                        f"{sorted(set(responses['family'].values.astype(str)))}")
    if not (_is_real(share) and 0 < share <= 1) or not (_is_real(strength) and 0 <= strength <= 1):
        raise DataError(f"share must lie in (0, 1] and strength in [0, 1]; got share={share!r}, strength={strength!r}")
    rng = np.random.default_rng(seed)
    y = responses["responses"].values.copy()
    items = rng.random(y.shape[0]) < share
    block = y[np.ix_(items, responses["family"].values == family)]
    block[(block == 0) & (rng.random(block.shape) < strength)] = 1
    y[np.ix_(items, responses["family"].values == family)] = block
    return responses.assign(responses=(responses["responses"].dims, y, responses["responses"].attrs)), items
