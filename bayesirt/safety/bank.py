"""A calibrated item bank read from a fit: item-parameter draws, the calibration cohort, id matching.

Two kinds of fit are read (:func:`read_bank`):

- a Bayesian fit, the ``posterior.nc`` of ``bayesirt fit`` (NUTS or ADVI): the bank keeps
  ``draws`` of its joint posterior draws of the item parameters (a seeded subset, the same for
  every item, so correlations between items' parameters are kept); the calibration abilities are
  the posterior means of ``theta`` and the calibration responses are its ``observed_data``;
- an MML or MAP-EM fit, the ``mml.nc`` of ``bayesirt mml`` / ``bayesirt fit --method map`` (or an
  :class:`~bayesirt.frequentist.mml.MMLResult`): the bank keeps ``draws`` draws from the fit's
  Laplace approximation, ``Normal(estimate, inverse observed information)`` over all item
  parameters jointly (the fit's ``covariance``); without a covariance but with standard errors,
  independent normals per parameter (the a-d correlation is then lost, said in ``kind``); with
  neither, the point estimates alone (item uncertainty ignored, said in ``kind``). Draws of a
  discrimination below 1e-3 or of an asymptote outside [0, 0.5] are clipped (noted in ``notes``).
  The calibration abilities are its EAPs; the calibration responses are read from the fit's
  ``observed_data`` group (``map.nc``, and ``mml.nc`` of this version, store them) or passed as
  ``calibration`` (``mml.nc`` of earlier versions).

Items and models are matched by id (:meth:`Bank.index`): ids the bank does not know are a
:class:`~bayesirt.errors.DataError` naming them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xarray as xr

from bayesirt.data import load
from bayesirt.errors import DataError
from bayesirt.models.information import ItemBank
from bayesirt.utils.validation import parameter_error

__all__ = ["Bank", "read_bank", "bank_from_posterior", "bank_from_mml", "BANK_KINDS", "CALIBRATION_ORIGINS"]

#: What a bank's item draws are (attribute ``kind``).
BANK_KINDS = ("posterior draws", "Laplace draws (joint covariance)", "Laplace draws (independent standard errors)",
              "point estimates")

#: Where a bank's calibration responses came from (attribute ``calibration_origin``).
CALIBRATION_ORIGINS = ("stored in the fit", "passed with --calibration", "none")

_PARAMS = ("discrimination", "intercept", "guessing", "slip")
_MIN_SLOPE = 1e-3


@dataclass
class Bank:
    """Item-parameter draws of a calibrated bank.

    Attributes
    ----------
    item_ids, item_group : ndarray of str, shape (n_items,)
    discrimination, intercept, guessing, slip : ndarray, shape (n_draws, n_items)
    abilities : ndarray, shape (n_calibration_models,)
        Point estimates of the calibration cohort's abilities (posterior means or EAPs): the
        calibrated ability range and the selection's information weights.
    calibration : xarray.Dataset or None
        The calibration responses (for the person-fit cut-off), when known.
    prior_mean, prior_sd : float
        The ability population of the fit (``Normal(0, 1)`` in every built-in spec).
    kind : str
        One of :data:`BANK_KINDS`.
    source : str
    notes : list of str
    calibration_origin : str
        Where ``calibration`` came from, one of :data:`CALIBRATION_ORIGINS`.
    """

    item_ids: np.ndarray
    item_group: np.ndarray
    discrimination: np.ndarray
    intercept: np.ndarray
    guessing: np.ndarray
    slip: np.ndarray
    abilities: np.ndarray
    calibration: xr.Dataset | None = None
    prior_mean: float = 0.0
    prior_sd: float = 1.0
    kind: str = "posterior draws"
    source: str = ""
    notes: list = field(default_factory=list)
    calibration_origin: str = "none"

    @property
    def n_items(self) -> int:
        return int(self.intercept.shape[1])

    @property
    def n_draws(self) -> int:
        return int(self.intercept.shape[0])

    def point(self) -> ItemBank:
        """Posterior (or approximate posterior) means of the item parameters."""
        return ItemBank(*(getattr(self, k).mean(axis=0) for k in _PARAMS))

    def draw(self, s: int, items=None) -> ItemBank:
        """The item parameters of draw ``s`` (restricted to ``items`` indices)."""
        sel = slice(None) if items is None else np.asarray(items)
        return ItemBank(*(getattr(self, k)[s, sel] for k in _PARAMS))

    def subset_draws(self, items) -> tuple[np.ndarray, ...]:
        """(discrimination, intercept, guessing, slip) draws of ``items``, each (n_draws, len(items))."""
        idx = np.asarray(items)
        return tuple(getattr(self, k)[:, idx] for k in _PARAMS)

    def ability_range(self) -> tuple[float, float]:
        """The range of the calibration cohort's ability estimates."""
        return float(np.min(self.abilities)), float(np.max(self.abilities))

    def index(self, ids, *, what: str = "item") -> np.ndarray:
        """Positions of ``ids`` among the bank's item ids; unknown ids are a DataError naming them."""
        ids = [str(v) for v in np.asarray(ids).astype(str).ravel()]
        lookup = {str(v): i for i, v in enumerate(self.item_ids)}
        unknown = [v for v in dict.fromkeys(ids) if v not in lookup]
        if unknown:
            shown = ", ".join(repr(v) for v in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
            raise DataError(f"{len(unknown)} {what} id(s) are not in the item bank ({self.source or 'bank'}, "
                            f"{self.n_items} items, e.g. {str(self.item_ids[0])!r}): {shown}; use the bank's item ids "
                            f"(test_items.csv of 'bayesirt select')")
        return np.array([lookup[v] for v in ids], dtype=np.int64)

    def summary(self) -> dict:
        lo, hi = self.ability_range()
        return {"source": self.source, "kind": self.kind, "n_items": self.n_items, "n_draws": self.n_draws,
                "n_calibration_models": int(self.abilities.size), "ability_range": [lo, hi],
                "calibration_responses": self.calibration is not None,
                "calibration_origin": self.calibration_origin,
                "n_calibration_responses": 0 if self.calibration is None else int(self.calibration.sizes["model"]),
                "population": f"Normal({self.prior_mean:g}, {self.prior_sd:g})", "notes": list(self.notes)}


def _check_draws(draws) -> int:
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or not 1 <= draws <= 100_000:
        raise parameter_error("draws", "bank_from_posterior and bank_from_mml", "an integer in [1, 100000]", draws)
    return int(draws)


def _coord(ds, name: str, n: int, default: str) -> np.ndarray:
    if ds is not None and name in ds.coords and ds[name].dims == ("item",):
        return ds[name].values.astype(str)
    if ds is not None and name in ds and ds[name].dims == ("item",):
        return ds[name].values.astype(str)
    return np.full(n, default)


def _calibration(calibration, item_ids: np.ndarray) -> xr.Dataset | None:
    """Calibration responses (a response Dataset or a path bayesirt reads) restricted to the bank's items."""
    if calibration is None:
        return None
    if not isinstance(calibration, xr.Dataset):
        calibration = load(calibration)
    if "responses" not in calibration:
        raise DataError("calibration must be a response Dataset (or a file bayesirt reads) with a 'responses' variable")
    have = calibration["item"].values.astype(str)
    missing = np.setdiff1d(item_ids, have)
    if missing.size:
        raise DataError(f"the calibration responses lack {missing.size} item(s) of the bank, e.g. {missing[0]!r}; pass "
                        "the responses the bank was fitted to")
    return calibration.assign_coords(item=have).sel(item=item_ids)


def _stored_responses(tree: xr.DataTree | None, item_ids: np.ndarray) -> xr.Dataset | None:
    """The responses a fit stored in its ``observed_data`` group (``posterior.nc``, ``map.nc``, ``mml.nc``
    of this version), restricted to the bank's items; None when it stored none."""
    if tree is None or "observed_data" not in tree.children or "responses" not in tree["observed_data"].to_dataset():
        return None
    obs = tree["observed_data"]["responses"].transpose("item", "model")
    values = np.where(np.isnan(obs.values), -1, obs.values).astype(np.int8)
    cal = xr.Dataset({"responses": (("item", "model"), values)},
                     coords={"item": obs["item"].values.astype(str), "model": obs["model"].values.astype(str)})
    if np.setdiff1d(item_ids, cal["item"].values).size:
        return None
    return cal.sel(item=item_ids)


def _calibration_of(tree, calibration, item_ids) -> tuple[xr.Dataset | None, str]:
    """The calibration responses and where they came from (:data:`CALIBRATION_ORIGINS`): the ones
    passed, else the ones the fit stored, else none."""
    if calibration is not None:
        return _calibration(calibration, item_ids), CALIBRATION_ORIGINS[1]
    stored = _stored_responses(tree, item_ids)
    return (stored, CALIBRATION_ORIGINS[0]) if stored is not None else (None, CALIBRATION_ORIGINS[2])


def bank_from_posterior(tree: xr.DataTree, *, draws: int = 200, seed: int = 0, calibration=None,
                        source: str = "") -> Bank:
    """A bank from a Bayesian fit (``posterior.nc``): ``draws`` joint posterior draws of the items."""
    draws = _check_draws(draws)
    post = tree["posterior"].to_dataset()
    if "intercept" not in post and "difficulty" not in post:
        raise DataError(f"{source or 'the posterior'} has no 'intercept' or 'difficulty'; a bank needs a 1PL-4PL fit "
                        "(bayesirt fit with a unidimensional spec)")
    if "item" not in post.dims:
        raise DataError(f"{source or 'the posterior'} has no 'item' dimension; pass a 1PL-4PL posterior.nc")
    stacked = post.stack(sample=("chain", "draw")).transpose("sample", ...)
    total = stacked.sizes["sample"]
    pick = np.sort(np.random.default_rng(seed).choice(total, size=min(draws, total), replace=False))
    n_items = post.sizes["item"]

    def grab(name, default):
        if name not in stacked:
            return np.full((pick.size, n_items), default)
        v = stacked[name].values[pick]
        return np.broadcast_to(v.reshape(pick.size, -1), (pick.size, n_items)).astype(float).copy()

    a = grab("discrimination", 1.0)
    d = grab("intercept", 0.0) if "intercept" in stacked else -a * grab("difficulty", 0.0)
    item_ids = post["item"].values.astype(str)
    const = tree["constant_data"].to_dataset() if "constant_data" in tree.children else None
    groups = _coord(const, "item_group", n_items, "all")
    abilities = post["theta"].mean(("chain", "draw")).values if "theta" in post else np.zeros(1)
    cal, origin = _calibration_of(tree, calibration, item_ids)
    return Bank(item_ids, groups, a, d, grab("guessing", 0.0), grab("slip", 0.0), np.asarray(abilities, float), cal,
                kind=BANK_KINDS[0], source=source or "posterior", notes=[], calibration_origin=origin)


def _population(attrs: dict) -> tuple[float, float]:
    text = str(attrs.get("population", "Normal(0, 1)"))
    try:
        mu, sd = (float(v) for v in text[text.index("(") + 1: text.index(")")].split(","))
    except ValueError:
        return 0.0, 1.0
    return mu, sd


def bank_from_mml(result, *, draws: int = 200, seed: int = 0, calibration=None, source: str = "") -> Bank:
    """A bank from an MML / MAP-EM fit (an ``MMLResult`` or the DataTree of ``mml.nc``): Laplace draws."""
    draws = _check_draws(draws)
    if isinstance(result, xr.DataTree):
        items = result["items"].to_dataset()
        abil = result["abilities"].to_dataset() if "abilities" in result.children else None
        cov = result["covariance"]["covariance"] if "covariance" in result.children else None
        attrs = dict(result.attrs)
    else:
        items, abil, cov, attrs = result.items, result.abilities, result.covariance, dict(result.attrs)
    item_ids = items["item"].values.astype(str)
    n = item_ids.size
    est = {k: (np.nan_to_num(items[k].values.astype(float), nan=0.0) if k in items else np.zeros(n)) for k in _PARAMS}
    if "discrimination" not in items:
        est["discrimination"] = np.ones(n)
    rng = np.random.default_rng(seed)
    out = {k: np.repeat(v[None], draws, axis=0) for k, v in est.items()}
    notes = []
    names = None if cov is None else [str(v) for v in cov["parameter"].values]
    if cov is not None and np.all(np.isfinite(cov.values)):
        mean = np.empty(len(names))
        slots = []
        for j, name in enumerate(names):
            base, _, rest = name.partition("[")
            i = None if not rest else int(np.flatnonzero(item_ids == rest[:-1])[0])
            mean[j] = est[base][0] if i is None else est[base][i]
            slots.append((base, i))
        z = rng.multivariate_normal(mean, cov.values, size=draws, method="cholesky")
        for j, (base, i) in enumerate(slots):
            if i is None:
                out[base][:] = z[:, j][:, None]
            else:
                out[base][:, i] = z[:, j]
        kind = BANK_KINDS[1]
    elif all(f"{k}_se" not in items or np.all(np.isnan(items[f"{k}_se"].values)) for k in _PARAMS):
        kind = BANK_KINDS[3]
        draws = 1
        out = {k: v[:1] for k, v in out.items()}
        notes.append("the fit has no standard errors: the items are fixed at their point estimates and their "
                     "uncertainty is not in the intervals (refit with standard errors for Laplace draws)")
    else:
        for k in _PARAMS:
            se = items[f"{k}_se"].values.astype(float) if f"{k}_se" in items else np.zeros(n)
            se = np.nan_to_num(se, nan=0.0)
            out[k] = out[k] + rng.standard_normal((draws, n)) * se[None]
        kind = BANK_KINDS[2]
        notes.append("the fit has standard errors but no covariance: draws are independent per parameter "
                     "(the correlation of an item's slope and intercept is ignored)")
    clipped = int((out["discrimination"] < _MIN_SLOPE).sum() + (out["guessing"] < 0).sum()
                  + (out["slip"] < 0).sum() + (out["guessing"] > 0.5).sum() + (out["slip"] > 0.5).sum())
    if clipped and kind != BANK_KINDS[3]:
        notes.append(f"{clipped} draw(s) of a slope below {_MIN_SLOPE:g} or an asymptote outside [0, 0.5] were clipped")
    out["discrimination"] = np.maximum(out["discrimination"], _MIN_SLOPE)
    out["guessing"], out["slip"] = np.clip(out["guessing"], 0, 0.5), np.clip(out["slip"], 0, 0.5)
    groups = _coord(items, "item_group", n, "all")
    abilities = abil["eap"].values if abil is not None and "eap" in abil else np.zeros(1)
    mu, sd = _population(attrs)
    cal, origin = _calibration_of(result if isinstance(result, xr.DataTree) else None, calibration, item_ids)
    return Bank(item_ids, groups, out["discrimination"], out["intercept"], out["guessing"], out["slip"],
                np.asarray(abilities, float), cal, mu, sd, kind, source or "mml", notes, origin)


def read_bank(bank, *, draws: int = 200, seed: int = 0, calibration=None) -> Bank:
    """The item bank of a fit: a path to ``posterior.nc`` or ``mml.nc``, a DataTree, an MMLResult or a Bank.

    Parameters
    ----------
    bank : path, xarray.DataTree, MMLResult or Bank
    draws : int, default 200
        Item-parameter draws kept (posterior draws, or Laplace draws of an MML fit).
    seed : int, default 0
        Seed of the draw subset / Laplace draws.
    calibration : path or xarray.Dataset, optional
        The responses the bank was fitted to (needed for an empirical person-fit cut-off with an
        MML bank; a posterior.nc carries its own).
    """
    if isinstance(bank, Bank):
        return bank
    source = ""
    if isinstance(bank, (str, os.PathLike)):
        path = Path(bank)
        if not path.is_file():
            raise DataError(f"no item bank at {path}; pass the posterior.nc of 'bayesirt fit' or the mml.nc of "
                            "'bayesirt mml'")
        try:
            bank = xr.open_datatree(path, engine="h5netcdf").load()
        except (OSError, ValueError) as err:
            raise DataError(f"cannot read the item bank {path} ({type(err).__name__}); pass the posterior.nc of "
                            "'bayesirt fit' or the mml.nc of 'bayesirt mml'") from None
        source = str(path)
    if isinstance(bank, xr.DataTree):
        if "items" in bank.children:  # mml.nc, or the map.nc of `fit --method map` (its posterior is one draw)
            return bank_from_mml(bank, draws=draws, seed=seed, calibration=calibration, source=source)
        if "posterior" in bank.children:
            return bank_from_posterior(bank, draws=draws, seed=seed, calibration=calibration, source=source)
        raise DataError(f"{source or 'the DataTree'} is neither a posterior (group 'posterior') nor an MML fit (group "
                        "'items'); pass the posterior.nc of 'bayesirt fit' or the mml.nc of 'bayesirt mml'")
    if hasattr(bank, "items") and hasattr(bank, "covariance"):
        return bank_from_mml(bank, draws=draws, seed=seed, calibration=calibration, source="MMLResult")
    raise DataError(f"cannot use {type(bank).__name__} as an item bank; pass a path to posterior.nc or mml.nc, a "
                    "DataTree or an MMLResult")
