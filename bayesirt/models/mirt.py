"""PyMC builder for compensatory logistic MIRT from a ``MIRTSpec``.

    P(y_im = 1) = sigmoid(loading_i . theta_m + d_i)

Exploratory specs identify rotation by an echelon pattern: ``D`` anchor items, chosen from the
data by pivoted QR of the leading singular vectors of the centred response matrix (the items whose
loading directions are strongest and most linearly independent), carry zero loadings above the
diagonal, with ``theta ~ N(0, I)``. That leaves the sign of each dimension, which is fixed after
sampling: :func:`align_signs` flips dimension k of a draw (loadings and abilities) when its anchor's
diagonal loading is negative. Sampling the diagonal with the symmetric prior and folding
afterwards gives exactly the posterior of the positive-diagonal model (whose prior is the folded
one), without its trap: a chain started in a reflected basin cannot reach the right one through a
half-normal boundary (seen here: R-hat 2.0 on a 2-factor design with the constraint in the
graph, 1.0 after folding). Every draw of every chain is then in the same rotation and sign, so
posterior means of loadings are meaningful.

Confirmatory specs give each item one positive loading on the dimension its ``item_map``
coordinate names, and correlated abilities ``theta ~ N(0, R)`` with unit variances, ``R ~ LKJ``.

As in the unidimensional builder, abilities are sampled as a mean plus a zero-sum deviation with
the mean moved into the intercepts (``theta_m = chol(R) (z_mean + z_dev_m)``,
``intercept_centered_i = d_i + loading_i . theta_mean``): an exact reparameterization with unit
Jacobian that removes the location ridge between abilities and intercepts from the likelihood.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import scipy.linalg
import xarray as xr

from bayesirt.data.responses import MISSING
from bayesirt.errors import ConfigError
from bayesirt.models.logistic import fused_loglik, prior_rv
from bayesirt.models.specs import MIRTSpec

__all__ = ["build_mirt", "align_signs", "anchor_items", "dimension_names", "echelon_free", "item_dimensions",
           "dimensions_identified"]


def anchor_items(responses: xr.Dataset, dimensions: int) -> np.ndarray:
    """The ``dimensions`` echelon anchor items, in pivot order (pivoted QR, deterministic).

    The centred response matrix (missing cells at the item mean) is reduced to its leading
    ``dimensions`` singular directions, scaled by the singular values; QR with column pivoting of
    the (dimension x item) loading matrix picks first the item with the largest loading norm, then
    the item with the largest component orthogonal to the chosen ones, and so on.
    """
    y = responses["responses"].values
    observed = y != MISSING
    x = np.where(observed, y, 0).astype(float)
    counts = observed.sum(axis=1)
    means = np.divide(x.sum(axis=1), counts, out=np.zeros(len(x)), where=counts > 0)
    x = np.where(observed, x - means[:, None], 0.0)
    u, s, _ = np.linalg.svd(x, full_matrices=False)
    loadings = (u[:, :dimensions] * s[:dimensions]).T
    _, _, pivots = scipy.linalg.qr(loadings, pivoting=True, mode="economic")
    return pivots[:dimensions]


def dimension_names(responses: xr.Dataset, spec: MIRTSpec) -> np.ndarray:
    """Labels of the ``dim`` coordinate: ``dim1..dimD``, or the item-map values (sorted)."""
    if spec.structure == "exploratory":
        return np.array([f"dim{k + 1}" for k in range(spec.dimensions)])
    return np.unique(_item_map(responses, spec))


def _item_map(responses: xr.Dataset, spec: MIRTSpec) -> np.ndarray:
    if spec.item_map not in responses.coords or responses[spec.item_map].dims != ("item",):
        item_coords = sorted(n for n, c in responses.coords.items() if c.dims == ("item",) and n != "item")
        raise ConfigError(f"build_mirt: the confirmatory spec {spec.name!r} maps items by {spec.item_map!r}, which is "
                          f"not an item coordinate of the data (item coordinates: {item_coords}); set item_map in the "
                          "spec")
    values = responses[spec.item_map].values.astype(str)
    if np.unique(values).size < 2:
        raise ConfigError(f"build_mirt: item_map {spec.item_map!r} has a single value; a confirmatory MIRT needs at "
                          "least two dimensions (or fit the unidimensional 2PL)")
    return values


def item_dimensions(responses: xr.Dataset, spec: MIRTSpec) -> np.ndarray:
    """Confirmatory: the index in :func:`dimension_names` of each item's dimension."""
    return np.searchsorted(dimension_names(responses, spec), _item_map(responses, spec))


def echelon_free(anchors: np.ndarray, n_items: int, n_dims: int) -> tuple[np.ndarray, np.ndarray]:
    """Exploratory: (rows, cols) of the free loadings, row-major: all but the anchors' loadings on and
    above the echelon diagonal (zero above it; the diagonal is a variable of its own)."""
    free = np.ones((n_items, n_dims), dtype=bool)
    for k, item in enumerate(anchors):
        free[item, k:] = False
    return np.nonzero(free)


def _loading_matrix(responses: xr.Dataset, spec: MIRTSpec, n_items: int, n_dims: int):
    """The (item, dim) loading tensor with its identification pattern, and the anchors (or None)."""
    prior = spec.priors["loading"]
    if spec.structure == "confirmatory":
        dim_index = item_dimensions(responses, spec)
        slope = prior_rv("slope", prior, dims="item")
        loading = pt.zeros((n_items, n_dims))
        return pt.set_subtensor(loading[np.arange(n_items), dim_index], slope), None
    anchors = anchor_items(responses, n_dims)
    rows, cols = echelon_free(anchors, n_items, n_dims)  # the diagonal is set below
    sigma = prior.params["sigma"]
    values = pm.Normal("loading_free", mu=0.0, sigma=sigma, shape=rows.size)
    diagonal = pm.Normal("loading_diagonal", mu=0.0, sigma=sigma, dims="dim")  # sign fixed by align_signs
    loading = pt.zeros((n_items, n_dims))
    loading = pt.set_subtensor(loading[rows, cols], values)
    return pt.set_subtensor(loading[anchors, np.arange(n_dims)], diagonal), anchors


def dimensions_identified(spec: MIRTSpec, n_dims: int, n_items: int, n_models: int) -> bool:
    """Whether an exploratory echelon of ``n_dims`` dimensions is identified on ``n_items`` x ``n_models``
    (a confirmatory spec's always is)."""
    return spec.structure != "exploratory" or n_dims <= min(n_items, n_models) - 1


def build_mirt(responses: xr.Dataset, spec: MIRTSpec) -> pm.Model:
    """Build the ``pm.Model`` of a MIRT spec for a response Dataset.

    Returns
    -------
    pymc.Model
        Reported variables ``loading`` (item, dim), ``intercept`` (item), ``theta`` (model, dim)
        and, confirmatory, ``factor_correlation`` (dim, dim_bis), listed in the attribute
        ``reported_variables`` (what a fit's posterior keeps). Exploratory models carry the
        anchor items as the model attribute ``anchor_items`` (item labels, echelon order).
    """
    y = responses["responses"].values
    observed = y != MISSING
    n_items, n_models = y.shape
    dims = dimension_names(responses, spec)
    n_dims = dims.size
    if not dimensions_identified(spec, n_dims, n_items, n_models):
        raise ConfigError(f"build_mirt: {n_dims} dimensions cannot be identified from {n_items} items x {n_models} "
                          "models; use fewer dimensions")
    coords = {"item": responses["item"].values, "model": responses["model"].values, "dim": dims,
              "dim_bis": dims}
    with pm.Model(coords=coords) as pm_model:
        loading, anchors = _loading_matrix(responses, spec, n_items, n_dims)
        pm.Deterministic("loading", loading, dims=("item", "dim"))
        if spec.structure == "confirmatory":
            chol = pm.LKJCorr("factor_cholesky", n=n_dims, eta=spec.priors["factor_correlation"].params["eta"])
            pm.Deterministic("factor_correlation", chol @ chol.T, dims=("dim", "dim_bis"))
        else:
            chol = pt.eye(n_dims)
        z_mean = pm.Normal("theta_mean", mu=0.0, sigma=1.0 / np.sqrt(n_models), dims="dim")
        z_dev = pm.ZeroSumNormal("theta_deviation", sigma=1.0, dims=("dim", "model"))
        theta_mean = chol @ z_mean
        theta_dev = chol @ z_dev  # (dim, model), zero-sum over models
        pm.Deterministic("theta", (theta_mean[:, None] + theta_dev).T, dims=("model", "dim"))
        shift = loading @ theta_mean
        ip = spec.priors["intercept"].params
        d_c = pm.Normal("intercept_centered", mu=ip["mu"] + shift, sigma=ip["sigma"], dims="item")
        pm.Deterministic("intercept", d_c - shift, dims="item")
        eta = loading @ theta_dev + d_c[:, None]
        pm.Potential("response_loglik", fused_loglik(eta, None, None, (y == 1).astype("float64"), observed))
    if anchors is not None:
        pm_model.anchor_items = responses["item"].values[anchors]
    pm_model.reported_variables = ["loading", "intercept", "theta"] \
        + ["factor_correlation"] * (spec.structure == "confirmatory")
    pm_model.n_cells = int(observed.sum())  # read by the ADVI stopping rule (bayesirt.inference.fitting)
    return pm_model


def align_signs(posterior: xr.Dataset, anchors) -> xr.Dataset:
    """Flip each draw's dimensions so every anchor's diagonal loading is positive.

    ``anchors`` are the item labels of the echelon (``fit`` records them in the attribute
    ``bayesirt_anchor_items``). ``loading`` and ``theta`` are flipped together, so every
    likelihood term is unchanged; the sampler's own variables are left as sampled.
    """
    diagonal = posterior["loading"].sel(item=xr.DataArray(list(anchors), dims="dim")).drop_vars("item")
    sign = xr.where(diagonal < 0, -1.0, 1.0)
    return posterior.assign(loading=posterior["loading"] * sign, theta=posterior["theta"] * sign)
