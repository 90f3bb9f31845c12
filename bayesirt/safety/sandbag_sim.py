"""Sandbagging simulation (SAFE "Sandbagging Detection"): the scopes, the coherent ability-shift
and random-error modes and :func:`sandbag`; the module docstring of
:mod:`bayesirt.safety.sandbagging` describes them. Detection lives there."""

from __future__ import annotations

import numpy as np
import xarray as xr

from bayesirt.data.responses import MISSING
from bayesirt.errors import DataError
from bayesirt.frequentist.mml import fit_mml
from bayesirt.models.information import ItemBank
from bayesirt.models.response import response_probability
from bayesirt.safety.adaptive import score_test
from bayesirt.safety.personfit import check_responses, item_parameters
from bayesirt.safety.settings import DEFAULT_SHIFTS, DIRECTIONS, MODES, PROMPTED_NOISE
from bayesirt.utils.validation import check_choice, check_int, check_number, check_probability, parameter_error

__all__ = ["SCOPES", "DIRECTIONS", "MODES", "DEFAULT_SHIFTS", "item_groups", "sandbag"]


#: Sandbagging scopes.
SCOPES = ("uniform", "targeted", "triggered")


def item_groups(responses: xr.Dataset, *, groups: int = 6, seed: int = 0) -> np.ndarray:
    """Item group labels for targeted sandbagging: ``item_group`` when it has two or more
    labels, else ``groups`` random equal pseudo-groups ``"pseudo1"...`` (seeded)."""
    da = check_responses(responses)
    if has_groups(da):
        return np.asarray(da["item_group"].values).astype(str)
    n = da.sizes["item"]
    check_int(groups, name="groups", caller="item_groups", low=2, high=n)  # pseudo-groups, at most one item each
    order = np.random.default_rng(seed).permutation(n)
    out = np.empty(n, dtype=object)
    out[order] = [f"pseudo{k + 1}" for k in np.arange(n) * groups // n]
    return out.astype(str)


def _scope_mask(y: np.ndarray, scope: str, labels: np.ndarray, target: str, trigger_fraction: float,
                rng: np.random.Generator) -> np.ndarray:
    """(items, models) cells in scope (observed only)."""
    obs = y != MISSING
    if scope == "uniform":
        return obs
    if scope == "triggered":
        k = max(1, int(round(trigger_fraction * y.shape[0])))
        keys = rng.random(y.shape)
        rank = np.argsort(np.argsort(keys, axis=0), axis=0)
        return obs & (rank < k)
    names = np.unique(labels)
    if target in ("weakest", "strongest"):
        onehot = (labels[:, None] == names[None, :]).astype(float)  # (items, groups)
        right = ((y == 1).T.astype(float)) @ onehot
        seen = obs.T.astype(float) @ onehot
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(seen > 0, right / seen, np.nan)
        sign = 1.0 if target == "weakest" else -1.0
        pick = np.argmin(np.where(np.isnan(rate), np.inf, sign * rate), axis=1)  # ties: first label
        return obs & (labels[:, None] == names[pick][None, :])
    return obs & (labels == target)[:, None]


def check_target(target, labels: np.ndarray) -> None:
    """A targeted scope names 'weakest', 'strongest' or an existing group."""
    if target not in ("weakest", "strongest") and target not in set(labels.tolist()):
        raise parameter_error("target", "sandbag", "'weakest', 'strongest' or an item group such as "
                              f"{sorted(set(labels.tolist()))[:6]}", target)


def has_groups(da: xr.DataArray) -> bool:
    return "item_group" in da.coords and np.unique(np.asarray(da["item_group"].values).astype(str)).size >= 2


def change_probability(bank: ItemBank, theta: np.ndarray, shift: float, direction: str) -> np.ndarray:
    """(items, models) probability that a response with the source value changes, so that it is
    distributed as at the shifted ability (module docstring: the monotone coupling)."""
    p = response_probability(theta, *bank)
    if direction == "down":
        shifted = response_probability(theta - shift, *bank)
        return np.clip(1.0 - shifted / np.maximum(p, 1e-300), 0.0, 1.0)
    shifted = response_probability(theta + shift, *bank)
    return np.clip((shifted - p) / np.maximum(1.0 - p, 1e-300), 0.0, 1.0)


def sandbag_array(y, scope, strength, direction, labels, target, trigger_fraction, rng, *, mode="random_errors",
                   bank=None, theta=None, noise=PROMPTED_NOISE):
    in_scope = _scope_mask(y, scope, labels, target, trigger_fraction, rng)
    source, goal = (1, 0) if direction == "down" else (0, 1)
    u = rng.random(y.shape)
    if mode == "random_errors":
        chance = strength
    else:  # the coherent shift; "prompted" adds item-level errors: a change by either mechanism
        chance = change_probability(bank, theta, strength, direction)
        chance = chance if mode == "ability_shift" else 1.0 - (1.0 - chance) * (1.0 - noise)
    changed = in_scope & (y == source) & (u < chance)
    return np.where(changed, goal, y).astype(np.int8), in_scope, changed


def sandbag(responses: xr.Dataset, *, scope: str, mode: str = "ability_shift", shift: float = 1.0,
            strength: float = 1.0, direction: str = "down", trigger_fraction: float = 0.25, target: str = "weakest",
            labels=None, items: xr.Dataset | None = None, noise: float = PROMPTED_NOISE, seed: int = 0) -> xr.Dataset:
    """Simulate a sandbagging run of every model from its genuine responses (module docstring).

    Parameters
    ----------
    responses : xarray.Dataset
        Genuine response Dataset.
    scope : {"uniform", "targeted", "triggered"}
    mode : {"ability_shift", "random_errors", "prompted"}, default "ability_shift"
    shift : float >= 0, default 1
        ``"ability_shift"`` and ``"prompted"``: the ability shift in logits.
    strength : float in [0, 1], default 1
        ``"random_errors"``: probability that an in-scope response with the source value changes.
    direction : {"down", "up"}, default "down"
    trigger_fraction : float in (0, 1), default 0.25
        Share of the items (rounded, at least one) carrying the trigger in a triggered run.
    target : str, default "weakest"
        Targeted scope: ``"weakest"`` or ``"strongest"`` group of each model, or a group label.
    labels : array_like of str, optional
        Item group of each item; default :func:`item_groups` of ``responses``.
    noise : float in [0, 1), default :data:`~bayesirt.safety.settings.PROMPTED_NOISE`
        ``"prompted"``: probability that an in-scope response with the source value changes on top of
        the coherent shift, whatever the item (the inconsistency of a prompted model).
    items : xarray.Dataset, optional
        ``"ability_shift"`` and ``"prompted"``: item parameters (as ``fit_mml(...).items``); default the regularized
        2PL fitted by MAP-EM to ``responses``. Each model's ability is its MAP under them.
    seed : int, default 0

    Returns
    -------
    xarray.Dataset
        The response Dataset with the sandbagged ``responses`` and boolean ``in_scope`` and
        ``changed`` (item, model); attrs record the settings.
    """
    check_choice(scope, SCOPES, name="scope", caller="sandbag")
    check_choice(mode, MODES, name="mode", caller="sandbag")
    check_choice(direction, DIRECTIONS, name="direction", caller="sandbag")
    strength = check_probability(strength, name="strength", caller="sandbag", closed=True)
    noise = check_number(noise, name="noise", caller="sandbag", low=0, high=1, high_open=True)
    shift = check_number(shift, name="shift", caller="sandbag", low=0)  # logits
    trigger_fraction = check_probability(trigger_fraction, name="trigger_fraction", caller="sandbag")
    da = check_responses(responses)
    labels = item_groups(responses, seed=seed) if labels is None else np.asarray(labels).astype(str)
    if labels.shape != (da.sizes["item"],):
        raise DataError(f"labels must have one item group per item ({da.sizes['item']}); got shape {labels.shape}")
    check_target(target, labels)
    y = np.asarray(da.values)
    bank = theta = None
    if mode != "random_errors":
        items = fit_mml(responses, "2pl", priors=True, se=False).items if items is None else items
        bank = item_parameters(items, da["item"].values)
        theta = full_ability(y.astype(np.int8), bank).theta
    y, in_scope, changed = sandbag_array(y, scope, strength if mode == "random_errors" else shift, direction,
                                          labels, target, trigger_fraction, np.random.default_rng(seed), mode=mode,
                                          bank=bank, theta=theta, noise=noise)
    out = responses.copy()
    out["responses"] = (("item", "model"), y, responses["responses"].attrs)
    out["in_scope"] = (("item", "model"), in_scope)
    out["changed"] = (("item", "model"), changed)
    level = f"strength={strength:g}" if mode == "random_errors" else f"shift={shift:g} logits"
    level += f", noise={noise:g}" if mode == "prompted" else ""
    out.attrs.update(sandbagging=f"mode={mode}, scope={scope}, {level}, direction={direction}, target={target}, "
                                 f"trigger_fraction={trigger_fraction:g}, seed={seed}")
    return out


def full_ability(y: np.ndarray, bank: ItemBank):
    return score_test(y, bank.discrimination, bank.intercept, guessing=bank.guessing, slip=bank.slip, method="map")
