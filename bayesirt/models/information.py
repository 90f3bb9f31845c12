"""Fisher information of 1PL-4PL items and tests, at point estimates or averaged over a posterior.

For P = c + (u - c) * sigmoid(a * theta + d) with upper asymptote u = 1 - s, the item information
at ability theta is (Lord 1980; Barton & Lord 1981 for the 4PL)

    I(theta) = a^2 * (P - c)^2 * (u - P)^2 / ((u - c)^2 * P * (1 - P)),

which reduces to a^2 * P * (1 - P) for the 2PL (c = 0, u = 1); the formula is
:func:`bayesirt.models.response.information_of_sigmoids`. Test information is the sum over items.

Three layers, as in ArviZ: array kernels (:func:`item_information`, :func:`test_information`, and
:func:`mean_item_information`, the average over draws and models in a compiled loop), a labelled
wrapper over item-parameter Datasets (:func:`information_curves`), and the posterior-averaged
curves of a fitted DataTree (:func:`posterior_information`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numba
import numpy as np
import xarray as xr

from bayesirt.errors import DataError
from bayesirt.models import kernels, response
from bayesirt.models.kernels import exp_clipped
from bayesirt.utils.numba_cache import drop_stale, sources_digest

__all__ = ["item_information", "test_information", "mean_item_information", "ItemBank", "item_bank",
           "information_curves", "posterior_information", "THETA_GRID"]

#: Default abilities of information curves.
THETA_GRID = np.linspace(-4.0, 4.0, 161)

_PARAMS = ("discrimination", "intercept", "guessing", "slip")
_SAMPLE = ("chain", "draw")
#: Floats of one (draw, item, theta) block of :func:`posterior_information` (8 MB per temporary).
BLOCK_CELLS = 1_000_000


def item_information(theta, discrimination, intercept, guessing=0.0, slip=0.0) -> np.ndarray:
    """Fisher information of each item at each ability.

    Parameters
    ----------
    theta : array_like, shape (..., n_models)
    discrimination, intercept, guessing, slip : array_like, shape (..., n_items) or scalar
        Leading axes (e.g. posterior draws) broadcast against those of ``theta``.

    Returns
    -------
    ndarray, shape (..., n_items, n_models)
        Never negative.
    """
    a = np.asarray(discrimination, dtype=float)[..., None]
    d = np.asarray(intercept, dtype=float)[..., None]
    c = np.asarray(guessing, dtype=float)[..., None]
    s = np.asarray(slip, dtype=float)[..., None]
    return response.information(a * np.asarray(theta, dtype=float)[..., None, :] + d, a, c, s)


def test_information(theta, discrimination, intercept, guessing=0.0, slip=0.0) -> np.ndarray:
    """Test information (sum of :func:`item_information` over items), shape ``(..., n_models)``."""
    return item_information(theta, discrimination, intercept, guessing, slip).sum(axis=-2)


test_information.__test__ = False  # a library function, not a pytest test


#: fast-math flags without "nnan"/"ninf", so a non-finite parameter stays visible. exp(x) for x <= 0 is
#: the likelihood kernel's :func:`~bayesirt.models.kernels.exp_clipped` (a table of 2^(j/32) and a
#: polynomial), so the loop over models vectorizes (libm's scalar exp would not).
_FASTMATH = {"arcp", "contract", "afn", "reassoc", "nsz"}
#: The digest of this module's source, the likelihood kernel's and the response function's (whose exp_clipped
#: and information formula the cached sums compile in), frozen into the cached :func:`_compiled_sources`.
_SOURCES = sources_digest(__file__, kernels.__file__, response.__file__)
#: The information formula of :mod:`bayesirt.models.response`, compiled for one cell (inlined into the sums).
_cell_information = numba.njit(inline="always")(response.information_of_sigmoids)


@numba.njit(cache=True)
def _compiled_sources():
    """:data:`_SOURCES` as it was when numba compiled this file's cached functions."""
    return _SOURCES


@numba.njit(fastmath=_FASTMATH, cache=True)
def _information_sums(theta, a, d, c, s):
    """Sum over draws k and models m of item j's information, for every j: the terms of
    :func:`item_information` one cell at a time (the response function's formula), with sigmoid(eta) and
    sigmoid(-eta) from e = exp(-|eta|) (|eta| capped at 700, where the information has long underflowed to 0)."""
    n_draws, n_models = theta.shape
    out = np.zeros(a.shape[1])
    e = np.empty(n_models)
    for k in range(n_draws):
        th = theta[k]
        for j in range(a.shape[1]):
            aj, dj, cj, sj = a[k, j], d[k, j], c[k, j], s[k, j]
            for m in range(n_models):
                e[m] = exp_clipped(-abs(aj * th[m] + dj))
            total = 0.0
            for m in range(n_models):
                ex = e[m]
                big = 1.0 / (1.0 + ex)
                small = ex * big
                positive = aj * th[m] + dj >= 0
                sig, sig_minus = (big, small) if positive else (small, big)
                total += _cell_information(sig, sig_minus, aj, cj, sj)
            out[j] += total
    return out


@functools.cache
def _fresh_information_sums():
    """:func:`_information_sums`, its cached build dropped first if ``kernels.py`` changed since it was cached
    (numba checks a cached function against its own file only)."""
    drop_stale(_compiled_sources, _SOURCES, _information_sums)
    return _information_sums


def mean_item_information(theta, discrimination, intercept, guessing=0.0, slip=0.0) -> np.ndarray:
    """Each item's information averaged over draws and models: ``item_information(theta, ...)
    .mean(axis=(0, 2))`` (equal to rounding) without its (draw, item, model) array, so memory
    stays O(draws x (items + models)); about 3 ns of CPU per cell.

    Parameters
    ----------
    theta : array_like, shape (n_draws, n_models)
    discrimination, intercept, guessing, slip : array_like, shape (n_draws, n_items), (n_draws, 1) or scalar

    Returns
    -------
    ndarray, shape (n_items,)
    """
    theta = np.asarray(theta, dtype=float)
    params = [np.asarray(x, dtype=float) for x in (discrimination, intercept, guessing, slip)]
    shape = np.broadcast_shapes(*(x.shape for x in params), (theta.shape[0], 1))
    a, d, c, s = (np.ascontiguousarray(np.broadcast_to(x, shape)) for x in params)
    return _fresh_information_sums()(np.ascontiguousarray(theta), a, d, c, s) / theta.size


class ItemBank(NamedTuple):
    """Item parameters, each of shape ``(n_items,)``: ``P = c + (1 - c - s) * sigmoid(a * theta + d)``."""

    discrimination: np.ndarray
    intercept: np.ndarray
    guessing: np.ndarray
    slip: np.ndarray

    @property
    def n_items(self) -> int:
        return self.intercept.shape[0]

    def subset(self, items) -> ItemBank:
        """The bank restricted to ``items`` (indices), in that order."""
        return ItemBank(*(x[items] for x in self))

    def log_pq(self, theta) -> tuple[np.ndarray, np.ndarray]:
        """``log P`` and ``log(1 - P)`` of every item at every ``theta``, shape ``(n_items, n_theta)``."""
        eta = self.discrimination[:, None] * np.asarray(theta, dtype=float)[None, :] + self.intercept[:, None]
        return response.log_probabilities(eta, self.guessing[:, None], self.slip[:, None])

    def information(self, theta) -> np.ndarray:
        """Fisher information, shape ``(n_items, n_theta)``."""
        return item_information(np.atleast_1d(theta), *self)


def item_bank(discrimination, intercept, guessing=0.0, slip=0.0) -> ItemBank:
    """Validate point item parameters and broadcast them to one length.

    Raises
    ------
    DataError
        Parameters not 1-D over items, of different lengths, not finite, or asymptotes outside
        ``guessing >= 0``, ``slip >= 0``, ``guessing + slip < 1``.
    """
    arrays = {}
    for name, value in zip(_PARAMS, (discrimination, intercept, guessing, slip)):
        arr = np.asarray(value, dtype=float)
        if arr.ndim > 1:
            raise DataError(f"{name} must be a scalar or 1-D over items, got shape {arr.shape}; "
                            "pass one value per item (e.g. posterior means)")
        if not np.all(np.isfinite(arr)):
            raise DataError(f"{name} contains non-finite values; pass finite item parameters")
        arrays[name] = arr
    sizes = {k: v.shape[0] for k, v in arrays.items() if v.ndim == 1}
    if not sizes:
        raise DataError("item parameters are all scalars; pass discrimination or intercept with one value per item")
    if len(set(sizes.values())) > 1:
        raise DataError(f"item parameters have different lengths {sizes}; pass one value per item for each")
    n = next(iter(sizes.values()))
    if n == 0:
        raise DataError("the item bank is empty; pass at least one item")
    bank = ItemBank(*(np.broadcast_to(v, (n,)).copy() for v in arrays.values()))
    if np.any(bank.guessing < 0) or np.any(bank.slip < 0) or np.any(bank.guessing + bank.slip >= 1):
        raise DataError("asymptotes must satisfy guessing >= 0, slip >= 0 and guessing + slip < 1; "
                        "check the guessing and slip values")
    return bank


def _theta(theta) -> np.ndarray:
    arr = np.asarray(THETA_GRID if theta is None else theta, dtype=float)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise DataError(f"theta must be a non-empty 1-D array of finite abilities; got shape {arr.shape}")
    return arr


def _curves(item_info: np.ndarray, theta: np.ndarray, items: xr.Dataset) -> xr.Dataset:
    coords = {"theta": theta, **{k: v for k, v in items.coords.items() if v.dims == ("item",)}}
    ds = xr.Dataset({"item_information": (("item", "theta"), item_info),
                     "test_information": ("theta", item_info.sum(axis=0))}, coords=coords)
    ds["standard_error"] = 1.0 / np.sqrt(ds["test_information"].where(ds["test_information"] > 0))
    if "item_group" in ds.coords:
        by_group = ds["item_information"].groupby("item_group").sum("item")
        ds["group_information"] = by_group.rename(item_group="group")
    ds["test_information"].attrs["description"] = "sum of item information over items"
    ds["standard_error"].attrs["description"] = "1 / sqrt(test information): the asymptotic SE of theta"
    return ds


def information_curves(items: xr.Dataset, theta=None) -> xr.Dataset:
    """Item, group and test information curves of point item parameters.

    Parameters
    ----------
    items : xarray.Dataset
        Dim ``item`` with ``discrimination`` and ``intercept`` and optionally ``guessing``,
        ``slip`` (e.g. :attr:`bayesirt.frequentist.mml.MMLResult.items`); coordinates on
        ``item`` (such as ``item_group``) are kept.
    theta : array_like, optional
        Abilities; default :data:`THETA_GRID` (-4 to 4 by 0.05).

    Returns
    -------
    xarray.Dataset
        ``item_information`` (item, theta), ``test_information`` (theta), ``standard_error``
        (theta) and, with an ``item_group`` coordinate, ``group_information`` (group, theta).
    """
    missing = [k for k in _PARAMS[:2] if k not in items]
    if missing or "item" not in items.dims:
        raise DataError(f"items needs dim 'item' and variables {list(_PARAMS[:2])}; missing {missing or ['item']}"
                        " (pass e.g. fit_mml(...).items)")
    th = _theta(theta)
    bank = item_bank(*(items[k].values if k in items else 0.0 for k in _PARAMS))
    return _curves(bank.information(th), th, items)


def posterior_information(tree: xr.DataTree, theta=None, *, max_draws: int | None = None,
                          chunk: int = 64) -> xr.Dataset:
    """Information curves averaged over posterior draws of the item parameters.

    ``E_post[I_j(theta)]`` at each fixed ``theta``: the information expected under item
    parameter uncertainty. It is flatter than the curve at the posterior means (uncertain
    difficulties spread the peak), so it does not overrate items that are poorly calibrated.

    Parameters
    ----------
    tree : xarray.DataTree
        A fit with a ``posterior`` group holding ``discrimination`` and ``intercept`` (and
        optionally ``guessing``, ``slip``) over ``(chain, draw, item)``; a ``discrimination``
        without ``item`` (a common 1PL slope) is broadcast.
    theta : array_like, optional
        Abilities; default :data:`THETA_GRID`.
    max_draws : int, optional
        Use this many draws, evenly thinned; default all.
    chunk : int, default 64
        Most draws per vectorized block; fewer when ``chunk * n_items * n_theta`` exceeds
        :data:`BLOCK_CELLS`, so a block's arrays stay a few MB whatever the number of items.

    Returns
    -------
    xarray.Dataset
        As :func:`information_curves`, plus ``test_information_sd`` (theta): the posterior SD
        of the test information.
    """
    if not isinstance(tree, xr.DataTree) or "posterior" not in tree.children:
        raise DataError("tree must be a DataTree with a 'posterior' group; "
                        "pass the result of bayesirt.inference.fitting.fit")
    post = tree["posterior"].to_dataset()
    missing = [k for k in _PARAMS[:2] if k not in post]
    if missing or "item" not in post["intercept"].dims:
        raise DataError(f"the posterior lacks {missing or ['intercept over item']}; pass a fit of a 1PL-4PL spec")
    stacked = post[[k for k in _PARAMS if k in post]].stack(sample=_SAMPLE)
    n = stacked.sizes["sample"]
    keep = np.arange(n) if max_draws is None or max_draws >= n else np.linspace(0, n - 1, int(max_draws)).astype(int)
    draws = {k: stacked[k].broadcast_like(stacked["intercept"]).transpose("sample", "item").values[keep]
             for k in stacked.data_vars}
    th = _theta(theta)
    total = np.zeros((post.sizes["item"], th.size))
    tests = []
    step = max(1, min(chunk, BLOCK_CELLS // (post.sizes["item"] * th.size)))
    for start in range(0, keep.size, step):
        part = [draws[k][start:start + step] if k in draws else 0.0 for k in _PARAMS]
        info = item_information(th, *part)  # (chunk, item, theta)
        total += info.sum(axis=0)
        tests.append(info.sum(axis=1))
    items = post["intercept"].isel({d: 0 for d in _SAMPLE}, drop=True).to_dataset()
    if "constant_data" in tree.children and "item_group" in tree["constant_data"]:  # a fit keeps its metadata there
        items = items.assign_coords(item_group=("item", tree["constant_data"]["item_group"].values))
    ds = _curves(total / keep.size, th, items)
    ds["test_information_sd"] = ("theta", np.concatenate(tests).std(axis=0, ddof=1) if keep.size > 1
                                 else np.zeros(th.size))
    ds.attrs["draws"] = int(keep.size)
    return ds
