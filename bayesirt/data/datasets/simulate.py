"""Simulated responses from logistic IRT models (1PL to 4PL), with the true parameters.

The model is ``P(correct) = c + (1 - c - s) * sigmoid(a * theta + d)`` for item parameters
discrimination ``a``, intercept ``d = -a * b`` (difficulty ``b``), guessing ``c`` and slip ``s``,
and model ability ``theta``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from bayesirt.data.kinds import KINDS, WITH_GUESSING, WITH_SLIP
from bayesirt.data.responses import make_responses
from bayesirt.errors import DataError

__all__ = ["KINDS", "simulate_pl"]


def _param(value: Any, drawn: np.ndarray, name: str, noun: str) -> np.ndarray:
    """An override (scalar or one value per item/model) or the drawn default."""
    if value is None:
        return drawn
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(drawn.shape, float(arr))
    if arr.shape != drawn.shape:
        raise DataError(f"{name} has shape {arr.shape} but there are {drawn.size} {noun}s; pass one value per {noun}")
    if not np.isfinite(arr).all():
        raise DataError(f"{name} contains non-finite values; pass finite numbers")
    return arr


def simulate_pl(
    kind: str = "2pl",
    *,
    n_items: int,
    n_models: int,
    seed: int | np.random.SeedSequence | np.random.Generator,
    missing: float = 0.0,
    theta: Any = None,
    discrimination: Any = None,
    intercept: Any = None,
    guessing: Any = None,
    slip: Any = None,
) -> tuple[xr.Dataset, xr.Dataset]:
    """Simulate binary responses from a 1PL-4PL logistic model.

    ``P(correct) = c + (1 - c - s) * sigmoid(a * theta + d)``.

    Defaults (each replaced by the matching argument when given; a scalar applies to all):

    - ``theta ~ Normal(0, 1)`` per model;
    - difficulty ``b ~ Normal(0, 1)`` per item and intercept ``d = -a * b`` (when
      ``intercept`` is given, difficulty is ``-d / a``);
    - discrimination ``a ~ LogNormal(0, 0.5)`` per item; ``1pl``: a common ``a = 1.0``;
    - guessing ``c ~ Beta(5, 17)`` (mean ~0.23) for 3pl/4pl, else 0;
    - slip ``s ~ Beta(2, 18)`` (mean 0.1) for 4pl, else 0.

    All default draws are made in a fixed order from ``np.random.default_rng(seed)`` whatever
    the kind and overrides (theta, log a, b, c, s, response uniforms, missingness), so the same
    seed gives identical arrays and e.g. a 2PL and a 3PL with one seed share theta, a and b.

    Parameters
    ----------
    kind : {"1pl", "2pl", "3pl", "3plu", "4pl"}
    n_items, n_models : int
        Matrix size, each at least 2.
    seed : int, SeedSequence or Generator
        Passed to :func:`numpy.random.default_rng`; the global NumPy seed is never used.
    missing : float
        Fraction of cells set missing completely at random (``round(missing * cells)`` cells).
        Afterwards any item or model left with no observed response gets one cell re-opened.
    theta : array-like, optional
        Abilities, one per model.
    discrimination, intercept, guessing, slip : array-like, optional
        Item parameters, one per item. ``1pl`` needs one common discrimination; guessing is
        only for 3pl/4pl and slip only for 4pl.

    Returns
    -------
    responses : xarray.Dataset
        From :func:`~bayesirt.data.responses.make_responses`; item ids ``i0000..``, model ids ``m000..``.
    truth : xarray.Dataset
        ``theta`` (model), ``discrimination``, ``difficulty``, ``intercept``, ``guessing``,
        ``slip`` (item), on the same ``item`` and ``model`` coordinates.

    Examples
    --------
    >>> ds, truth = simulate_pl("2pl", n_items=20, n_models=100, seed=1)
    >>> ds["responses"].shape
    (20, 100)
    """
    kind = str(kind).lower()
    if kind not in KINDS:
        raise DataError(f"unknown model kind {kind!r}; use one of {', '.join(KINDS)}")
    for label, n in (("n_items", n_items), ("n_models", n_models)):
        if not isinstance(n, (int, np.integer)) or n < 2:
            raise DataError(f"{label} must be an integer of at least 2, got {n!r}; simulate at least 2 items and models")
    if not 0.0 <= missing < 1.0:
        raise DataError(f"missing must be a fraction in [0, 1), got {missing!r}; pass e.g. missing=0.1")
    if kind not in WITH_SLIP and slip is not None:
        raise DataError(f"slip applies only to kind='3plu'/'4pl' (got kind={kind!r}); change kind or drop slip")
    if kind not in WITH_GUESSING and guessing is not None:
        raise DataError(f"guessing applies only to kind='3pl'/'4pl' (got kind={kind!r}); change kind or drop guessing")

    rng = np.random.default_rng(seed)
    draw_theta = rng.normal(0.0, 1.0, n_models)
    draw_a = np.exp(rng.normal(0.0, 0.5, n_items))
    draw_b = rng.normal(0.0, 1.0, n_items)
    draw_c = rng.beta(5.0, 17.0, n_items)
    draw_s = rng.beta(2.0, 18.0, n_items)
    uniforms = rng.random((n_items, n_models))

    th = _param(theta, draw_theta, "theta", "model")
    if kind == "1pl":
        a = _param(discrimination, np.ones(n_items), "discrimination", "item")
        if not np.allclose(a, a[0]):
            raise DataError("kind='1pl' needs one common discrimination; pass a scalar or use kind='2pl'")
    else:
        a = _param(discrimination, draw_a, "discrimination", "item")
    if intercept is None:
        b = draw_b
        d = -a * b
    else:
        d = _param(intercept, draw_b, "intercept", "item")
        with np.errstate(divide="ignore", invalid="ignore"):
            b = -d / a
    c = _param(guessing, draw_c if kind in WITH_GUESSING else np.zeros(n_items), "guessing", "item")
    s = _param(slip, draw_s if kind in WITH_SLIP else np.zeros(n_items), "slip", "item")
    if (c < 0).any() or (s < 0).any() or (c + s >= 1).any():
        raise DataError("guessing and slip must be >= 0 with guessing + slip < 1 for every item; adjust them")

    eta = a[:, None] * th[None, :] + d[:, None]
    p = c[:, None] + (1.0 - c - s)[:, None] / (1.0 + np.exp(-eta))
    y = (uniforms < p).astype(np.float64)

    n_cells = n_items * n_models
    n_missing = int(round(missing * n_cells))
    if n_missing:
        y.ravel()[rng.choice(n_cells, size=n_missing, replace=False)] = np.nan
        for axis, n_other in ((1, n_models), (0, n_items)):  # items (rows), then models (columns)
            for k in np.flatnonzero(np.isnan(y).all(axis=axis)):
                j = int(rng.integers(n_other))
                cell = (k, j) if axis == 1 else (j, k)
                y[cell] = float(uniforms[cell] < p[cell])

    items = np.array([f"i{k:04d}" for k in range(n_items)])
    models = np.array([f"m{k:03d}" for k in range(n_models)])
    seed_txt = seed if isinstance(seed, (int, np.integer)) else type(seed).__name__
    ds = make_responses(
        y,
        item_id=items,
        model_id=models,
        name=f"simulated_{kind}",
        source=f"bayesirt.data.datasets.simulate_pl(kind={kind!r}, seed={seed_txt}, missing={missing})",
    )
    truth = xr.Dataset(
        {
            "theta": ("model", th),
            "discrimination": ("item", a),
            "difficulty": ("item", b),
            "intercept": ("item", d),
            "guessing": ("item", c),
            "slip": ("item", s),
        },
        coords={"item": ds["item"].values, "model": ds["model"].values},
        attrs={"kind": kind, "formula": "P = c + (1 - c - s) * sigmoid(a * theta + d), d = -a * b"},
    )
    return ds, truth
