"""The spec families of ``nuts_numpyro.py``: for each, its simulator, bayesirt's fitting call, the NumPyro
models (naive and reparameterized, code run in the NumPyro venv) and the mapping of NumPyro's draws to
the variables bayesirt reports.

Every NumPyro model has the priors of bayesirt's spec (``models/*.toml``, ``bayesirt/models/logistic.py``,
``mirt.py``, ``family_dif.py``), so both samplers target the same posterior of the reported variables:

* ``1pl`` ... ``4pl`` -- ``models/rasch.toml``, ``2pl.toml``, ``3pl.toml``, ``4pl.toml``; data
  ``bayesirt.data.simulate_pl``. Naive: theta ~ N(0, 1), logit a theta + d. Reparameterized: theta = mean +
  zero-sum deviation, the mean moved into the intercepts (``d_centered ~ N(a theta_mean, 2)``); the 1PL
  samples the scaled deviation a * deviation ~ ZeroSumNormal(a), as bayesirt does.
* ``2pl-hierarchical`` -- ``models/2pl-hierarchical.toml``: log a ~ N(mu_a, sigma_a), b ~ N(mu_b, sigma_b)
  with mu_a ~ N(0, .5), sigma_a ~ HalfNormal(.5), mu_b ~ N(0, 1), sigma_b ~ HalfNormal(2); logit a (theta - b).
  Reparameterized: bayesirt's scale-free coordinates (``build_logistic``): with g = exp(mu_a), m = g theta_mean
  ~ N(0, g / sqrt(n)), u = g deviation ~ ZeroSumNormal(g), r = a / g ~ LogNormal(0, sigma_a), g mu_b ~ N(0, g),
  g sigma_b ~ HalfNormal(2 g), beta = g (b - theta_mean) ~ N(g mu_b - m, g sigma_b), logit r (u - beta).
  Data: ``simulate_pl("2pl")``.
* ``mirt`` -- ``models/mirt.toml``: 2-D exploratory compensatory, loadings N(0, 1.5) with the echelon
  pattern of ``bayesirt.models.mirt.anchor_items`` (computed here from the data and given to NumPyro: the
  same anchors and zeros), intercepts N(0, 2), theta ~ N(0, I). Both samplers' draws are sign-aligned
  by ``bayesirt.models.mirt.align_signs`` (the anchors' diagonal loadings made positive, loadings and
  abilities flipped together), which is what ``fit`` reports, so loadings, abilities and intercepts are
  compared as reported. Reparameterized: theta = mean + zero-sum deviation per dimension, the shift
  ``loading . theta_mean`` moved into the intercepts. Data: 2 dimensions, each item a primary loading
  LogNormal(0, .5) on one dimension and a secondary N(0, .3) on the other, d ~ N(0, 1).
* ``mirt-confirmatory`` -- ``models/mirt-confirmatory.toml``: each item's one slope LogNormal(0, .5) on
  the dimension of its ``item_group`` (2 groups, half the items each), theta ~ N(0, R), R ~ LKJ(2)
  (NumPyro: ``LKJCholesky(2, 2)``), intercepts N(0, 2). Reparameterized: theta = chol(R) (mean + zero-sum
  deviation), the shift moved into the intercepts. Naive: theta ~ MultivariateNormal(0, scale_tril=chol(R)).
  Data: correlation .5, slopes LogNormal(0, .5), d ~ N(0, 1).
* ``dif`` -- the audit's residual family-DIF model (``bayesirt/models/family_dif.py``), sampled by
  ``bayesirt.audit.bayes.posterior.fit_family_dif_posterior(method="nuts")``: logit b_i + o_im +
  delta_{i, f(m)} with fixed offsets o, 4 families, delta_i. ~ ZeroSumNormal(1) per item. bayesirt's
  default easiness prior is flat, which NumPyro has no distribution for (and which is improper for an
  item answered all right or all wrong), so both use ``easiness_prior="normal"``: b ~ N(0, 2).
  Reparameterized = bayesirt's form (``ZeroSumNormal``); naive = what a NumPyro user writes first without
  a zero-sum distribution: F free effects N(0, 1) per item, centred in the likelihood (their centred part
  is exactly ZeroSumNormal(1), the mean is left to its prior). Data: offsets o = a_i theta_m (a ~
  LogNormal(0, .5), theta ~ N(0, 1)), b ~ N(0, 1), delta ~ ZeroSumNormal(.5), families by model index mod 4.

``VARIABLES`` of a family are the reported variables whose min bulk ESS is the benchmark's figure (every
element; constant ones, such as the zeros of a loading pattern or the unit diagonal of a correlation
matrix, are left out) and whose posterior means are compared between the samplers (``agreement``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

MIRT_DIMS = 2
DIF_FAMILIES = 4
CONFIRMATORY_CORRELATION = 0.5

# Run in the NumPyro venv after the runner's prelude (which defines numpyro, dist, jnp, jax, np, SPEC,
# X: the family's extra arrays as NumPy, and masked(y, observed, d)). Each family defines naive(y, observed)
# and reparam(y, observed): y (item, model) float32 with 0 at missing cells, observed a bool mask or None.
PL_MODELS = r'''
def likelihood(y, observed, eta, n_items):
    """Bernoulli by logits for the 1PL/2PL, by probability with the spec's asymptotes (c ~ Beta(5, 17),
    s ~ Beta(2, 18), as models/3pl.toml and 4pl.toml)."""
    if SPEC["spec"] in ("1pl", "2pl"):
        return masked(y, observed, dist.Bernoulli(logits=eta))
    c = numpyro.sample("c", dist.Beta(5.0, 17.0).expand([n_items]))[:, None]
    s = numpyro.sample("s", dist.Beta(2.0, 18.0).expand([n_items]))[:, None] if SPEC["spec"] == "4pl" else 0.0
    masked(y, observed, dist.Bernoulli(probs=c + (1.0 - c - s) * jax.nn.sigmoid(eta)))

def slopes(n_items):
    """a ~ LogNormal(0, 0.5): one per item, or one common slope for the 1PL (models/rasch.toml)."""
    if SPEC["spec"] == "1pl":
        return numpyro.sample("a", dist.LogNormal(0.0, 0.5)) * jnp.ones(n_items)
    return numpyro.sample("a", dist.LogNormal(0.0, 0.5).expand([n_items]))

def reparam(y, observed):
    n_items, n_models = y.shape
    theta_mean = numpyro.sample("theta_mean", dist.Normal(0.0, 1.0 / np.sqrt(n_models)))
    a = slopes(n_items)
    if SPEC["spec"] == "1pl":
        # bayesirt's form (build_logistic): the scaled deviation u = a * deviation ~ ZeroSumNormal(a)
        u = numpyro.sample("theta_deviation_scaled", dist.ZeroSumNormal(a[0], event_shape=(n_models,)))
        dev = numpyro.deterministic("theta_deviation", u / a[0])
    else:
        dev = numpyro.sample("theta_deviation", dist.ZeroSumNormal(1.0, event_shape=(n_models,)))
    d_c = numpyro.sample("d_centered", dist.Normal(a * theta_mean, 2.0))
    likelihood(y, observed, a[:, None] * dev[None, :] + d_c[:, None], n_items)

def naive(y, observed):
    n_items, n_models = y.shape
    theta = numpyro.sample("theta", dist.Normal(0.0, 1.0).expand([n_models]))
    a = slopes(n_items)
    d = numpyro.sample("d", dist.Normal(0.0, 2.0).expand([n_items]))
    likelihood(y, observed, a[:, None] * theta[None, :] + d[:, None], n_items)
'''

HIERARCHICAL_MODELS = r'''
def item_priors(n_items):
    """models/2pl-hierarchical.toml: log a ~ N(mu_a, sigma_a), b's location and scale learned."""
    a_mu = numpyro.sample("discrimination_mu", dist.Normal(0.0, 0.5))
    a_sigma = numpyro.sample("discrimination_sigma", dist.HalfNormal(0.5))
    b_mu = numpyro.sample("difficulty_mu", dist.Normal(0.0, 1.0))
    b_sigma = numpyro.sample("difficulty_sigma", dist.HalfNormal(2.0))
    return numpyro.sample("a", dist.LogNormal(a_mu, a_sigma).expand([n_items])), b_mu, b_sigma

def reparam(y, observed):
    """bayesirt's scale-free coordinates (build_logistic): g = exp(mu_a), m = g theta_mean, u = g deviation,
    r = a / g, beta = g (b - theta_mean), the difficulty's hyperparameters times g."""
    n_items, n_models = y.shape
    a_mu = numpyro.sample("discrimination_mu", dist.Normal(0.0, 0.5))
    a_sigma = numpyro.sample("discrimination_sigma", dist.HalfNormal(0.5))
    g = jnp.exp(a_mu)
    m = numpyro.sample("theta_mean_scaled", dist.Normal(0.0, g / np.sqrt(n_models)))
    u = numpyro.sample("theta_deviation_scaled", dist.ZeroSumNormal(g, event_shape=(n_models,)))
    r = numpyro.sample("discrimination_relative", dist.LogNormal(0.0, a_sigma).expand([n_items]))
    b_mu = numpyro.sample("difficulty_mu_scaled", dist.Normal(0.0, g))
    b_sigma = numpyro.sample("difficulty_sigma_scaled", dist.HalfNormal(2.0 * g))
    beta = numpyro.sample("b_centered_scaled", dist.Normal(b_mu - m, b_sigma).expand([n_items]))
    masked(y, observed, dist.Bernoulli(logits=r[:, None] * (u[None, :] - beta[:, None])))

def naive(y, observed):
    n_items, n_models = y.shape
    theta = numpyro.sample("theta", dist.Normal(0.0, 1.0).expand([n_models]))
    a, b_mu, b_sigma = item_priors(n_items)
    b = numpyro.sample("b", dist.Normal(b_mu, b_sigma).expand([n_items]))
    masked(y, observed, dist.Bernoulli(logits=a[:, None] * (theta[None, :] - b[:, None])))
'''

MIRT_MODELS = r'''
def loadings(n_items):
    """models/mirt.toml: free loadings and the anchors' diagonal N(0, 1.5), zero above the diagonal."""
    rows, cols, anchors = X["free_rows"], X["free_cols"], X["anchors"]
    dims = anchors.size
    values = numpyro.sample("loading_free", dist.Normal(0.0, 1.5).expand([rows.size]))
    diagonal = numpyro.sample("loading_diagonal", dist.Normal(0.0, 1.5).expand([dims]))
    return jnp.zeros((n_items, dims)).at[rows, cols].set(values).at[anchors, np.arange(dims)].set(diagonal)

def reparam(y, observed):
    n_items, n_models = y.shape
    lam = loadings(n_items)
    dims = lam.shape[1]
    z_mean = numpyro.sample("theta_mean", dist.Normal(0.0, 1.0 / np.sqrt(n_models)).expand([dims]))
    z_dev = numpyro.sample("theta_deviation", dist.ZeroSumNormal(1.0, event_shape=(n_models,)).expand([dims]))
    d_c = numpyro.sample("d_centered", dist.Normal(lam @ z_mean, 2.0))
    masked(y, observed, dist.Bernoulli(logits=lam @ z_dev + d_c[:, None]))

def naive(y, observed):
    n_items, n_models = y.shape
    lam = loadings(n_items)
    theta = numpyro.sample("theta", dist.Normal(0.0, 1.0).expand([n_models, lam.shape[1]]))
    d = numpyro.sample("d", dist.Normal(0.0, 2.0).expand([n_items]))
    masked(y, observed, dist.Bernoulli(logits=lam @ theta.T + d[:, None]))
'''

CONFIRMATORY_MODELS = r'''
def structure(n_items):
    """models/mirt-confirmatory.toml: one slope LogNormal(0, .5) per item on its group's dimension, R ~ LKJ(2)."""
    dim_index = X["dim_index"]
    dims = int(dim_index.max()) + 1
    slope = numpyro.sample("slope", dist.LogNormal(0.0, 0.5).expand([n_items]))
    chol = numpyro.sample("chol", dist.LKJCholesky(dims, 2.0))
    return jnp.zeros((n_items, dims)).at[np.arange(n_items), dim_index].set(slope), chol

def reparam(y, observed):
    n_items, n_models = y.shape
    lam, chol = structure(n_items)
    dims = lam.shape[1]
    z_mean = numpyro.sample("theta_mean", dist.Normal(0.0, 1.0 / np.sqrt(n_models)).expand([dims]))
    z_dev = numpyro.sample("theta_deviation", dist.ZeroSumNormal(1.0, event_shape=(n_models,)).expand([dims]))
    shift = lam @ (chol @ z_mean)
    d_c = numpyro.sample("d_centered", dist.Normal(shift, 2.0))
    masked(y, observed, dist.Bernoulli(logits=lam @ (chol @ z_dev) + d_c[:, None]))

def naive(y, observed):
    n_items, n_models = y.shape
    lam, chol = structure(n_items)
    theta = numpyro.sample("theta", dist.MultivariateNormal(jnp.zeros(lam.shape[1]), scale_tril=chol).expand([n_models]))
    d = numpyro.sample("d", dist.Normal(0.0, 2.0).expand([n_items]))
    masked(y, observed, dist.Bernoulli(logits=lam @ theta.T + d[:, None]))
'''

DIF_MODELS = r'''
def reparam(y, observed):
    """bayesirt/models/family_dif.py with easiness_prior="normal": b ~ N(0, 2), delta_i. ~ ZeroSumNormal(1)."""
    n_items, n_models = y.shape
    b = numpyro.sample("b", dist.Normal(0.0, 2.0).expand([n_items]))
    delta = numpyro.sample("delta", dist.ZeroSumNormal(1.0, event_shape=(int(SPEC["n_families"]),)).expand([n_items]))
    masked(y, observed, dist.Bernoulli(logits=b[:, None] + X["offsets"] + delta[:, X["family"]]))

def naive(y, observed):
    """F free effects N(0, 1) per item, centred in the likelihood (their centred part is ZeroSumNormal(1))."""
    n_items, n_models = y.shape
    b = numpyro.sample("b", dist.Normal(0.0, 2.0).expand([n_items]))
    raw = numpyro.sample("delta_raw", dist.Normal(0.0, 1.0).expand([n_items, int(SPEC["n_families"])]))
    delta = raw - raw.mean(axis=1, keepdims=True)
    masked(y, observed, dist.Bernoulli(logits=b[:, None] + X["offsets"] + delta[:, X["family"]]))
'''


@dataclass(frozen=True)
class Family:
    """One spec family: ``simulate(models, items, seed, missing) -> (responses, extra)`` (``extra``: the
    arrays the fit needs beyond the responses), ``fit(responses, extra, args) -> DataTree`` (bayesirt's
    public call), the NumPyro model code, ``peer_inputs(responses, extra) -> (arrays, params)`` (what
    the NumPyro models read as ``X`` and ``SPEC``), ``posterior(draws, kind, responses, extra) -> dict``
    (NumPyro's draws as bayesirt's reported variables: name -> (dims without chain/draw, array)) and the
    reported variables the benchmark diagnoses."""
    simulate: Callable
    fit: Callable
    numpyro_code: str
    peer_inputs: Callable
    posterior: Callable
    variables: tuple[str, ...]
    spec_file: str


def _simulate_pl(spec: str):
    def simulate(models: int, items: int, seed: int, missing: float):
        from bayesirt.data import simulate_pl

        responses, _ = simulate_pl(spec, n_items=items, n_models=models, seed=seed, missing=missing)
        return responses, {}
    return simulate


def _fit_spec(spec: str):
    def call(responses, extra, args):
        from bayesirt.inference.fitting import fit

        return fit(responses, spec, method="nuts", draws=args.draws, tune=args.tune, chains=args.chains,
                   seed=args.seed, progress=False)
    return call


def _no_inputs(spec: str):
    return lambda responses, extra: ({}, {"spec": spec})


def _pl_posterior(draws: dict, kind: str, responses, extra) -> dict:
    a = draws["a"]  # (chain, draw, item), or (chain, draw) for the 1PL's common slope
    a_items = a if a.ndim == 3 else a[..., None]
    if kind == "reparam":
        theta = draws["theta_mean"][..., None] + draws["theta_deviation"]
        intercept = draws["d_centered"] - a_items * draws["theta_mean"][..., None]
    else:
        theta, intercept = draws["theta"], draws["d"]
    return {"theta": (("model",), theta), "discrimination": (("item",)[:a.ndim - 2], a),
            "intercept": (("item",), intercept)}


def _hierarchical_posterior(draws: dict, kind: str, responses, extra) -> dict:
    if kind == "reparam":  # the scale-free coordinates (HIERARCHICAL_MODELS)
        g = np.exp(draws["discrimination_mu"])
        m, g_items = draws["theta_mean_scaled"][..., None], g[..., None]
        theta = (m + draws["theta_deviation_scaled"]) / g_items
        a, b = g_items * draws["discrimination_relative"], (draws["b_centered_scaled"] + m) / g_items
        hyper = {k: draws[f"{k}_scaled"] / g for k in ("difficulty_mu", "difficulty_sigma")}
    else:
        theta, a, b, hyper = draws["theta"], draws["a"], draws["b"], {}
    draws = draws | hyper
    return {"theta": (("model",), theta), "discrimination": (("item",), a), "intercept": (("item",), -a * b),
            **{k: ((), draws[k]) for k in HIERARCHY}}


HIERARCHY = ("discrimination_mu", "discrimination_sigma", "difficulty_mu", "difficulty_sigma")


def _mirt_data(models: int, items: int, seed: int, missing: float, confirmatory: bool):
    """Compensatory 2-D logistic responses: exploratory (a primary LogNormal(0, .5) and a secondary
    N(0, .3) loading per item, theta ~ N(0, I)) or confirmatory (one LogNormal(0, .5) slope on the item's
    group, theta ~ N(0, R) with correlation CONFIRMATORY_CORRELATION); d ~ N(0, 1); MCAR missing cells."""
    from bayesirt.data import make_responses

    rng = np.random.default_rng(seed)
    r = CONFIRMATORY_CORRELATION if confirmatory else 0.0
    cov = np.array([[1.0, r], [r, 1.0]])
    theta = rng.multivariate_normal(np.zeros(MIRT_DIMS), cov, size=models)
    primary = np.arange(items) % MIRT_DIMS
    loading = np.zeros((items, MIRT_DIMS)) if confirmatory else rng.normal(0.0, 0.3, (items, MIRT_DIMS))
    loading[np.arange(items), primary] = np.exp(rng.normal(0.0, 0.5, items))
    d = rng.normal(0.0, 1.0, items)
    p = 1.0 / (1.0 + np.exp(-(loading @ theta.T + d[:, None])))
    y = (rng.random((items, models)) < p).astype(float)
    y[_missing_cells(rng, y.shape, missing)] = np.nan
    return make_responses(y, item_id=[f"i{i:04d}" for i in range(items)], model_id=[f"m{m:03d}" for m in range(models)],
                          item_group=[f"g{k + 1}" for k in primary], name="mirt-sim")


def _missing_cells(rng, shape, missing: float) -> np.ndarray:
    """A boolean mask of round(missing * cells) cells missing at random, leaving every row and column
    at least one observed cell (as simulate_pl does)."""
    mask = np.zeros(shape, dtype=bool)
    mask.flat[rng.choice(mask.size, size=round(missing * mask.size), replace=False)] = True
    for axis in (1, 0):
        for k in np.flatnonzero(mask.all(axis=axis)):
            j = rng.integers(shape[1 - axis])
            mask[(k, j) if axis == 1 else (j, k)] = False
    return mask


def _simulate_mirt(confirmatory: bool):
    def simulate(models: int, items: int, seed: int, missing: float):
        return _mirt_data(models, items, seed, missing, confirmatory), {}
    return simulate


def _mirt_inputs(responses, extra):
    from bayesirt.models.mirt import anchor_items

    anchors = anchor_items(responses, MIRT_DIMS)
    free = np.ones((responses.sizes["item"], MIRT_DIMS), dtype=bool)
    for k, item in enumerate(anchors):
        free[item, k:] = False  # as bayesirt.models.mirt._loading_matrix: zero above the diagonal
    rows, cols = np.nonzero(free)
    return {"anchors": anchors, "free_rows": rows, "free_cols": cols}, {}


def _mirt_posterior(draws: dict, kind: str, responses, extra) -> dict:
    """Loadings, intercepts and abilities (model, dim), sign-aligned as ``fit`` aligns its own."""
    import xarray as xr

    from bayesirt.models.mirt import align_signs

    inputs, _ = _mirt_inputs(responses, extra)
    n_items, dims = responses.sizes["item"], MIRT_DIMS
    shape = draws["loading_diagonal"].shape[:2]
    lam = np.zeros((*shape, n_items, dims))
    lam[..., inputs["free_rows"], inputs["free_cols"]] = draws["loading_free"]
    lam[..., inputs["anchors"], np.arange(dims)] = draws["loading_diagonal"]
    if kind == "reparam":
        z_mean = draws["theta_mean"]
        theta = np.swapaxes(z_mean[..., None] + draws["theta_deviation"], -1, -2)
        intercept = draws["d_centered"] - np.einsum("cdik,cdk->cdi", lam, z_mean)
    else:
        theta, intercept = draws["theta"], draws["d"]
    dims_coord = [f"dim{k + 1}" for k in range(dims)]
    post = xr.Dataset({"loading": (("chain", "draw", "item", "dim"), lam), "theta": (("chain", "draw", "model", "dim"), theta)},
                      coords={"item": responses["item"].values, "model": responses["model"].values, "dim": dims_coord})
    post = align_signs(post, responses["item"].values[inputs["anchors"]])
    return {"loading": (("item", "dim"), post["loading"].values), "intercept": (("item",), intercept),
            "theta": (("model", "dim"), post["theta"].values)}


def _confirmatory_inputs(responses, extra):
    groups = responses["item_group"].values.astype(str)
    return {"dim_index": np.searchsorted(np.unique(groups), groups)}, {}


def _confirmatory_posterior(draws: dict, kind: str, responses, extra) -> dict:
    dim_index = _confirmatory_inputs(responses, extra)[0]["dim_index"]
    n_items, dims = responses.sizes["item"], int(dim_index.max()) + 1
    chol = draws["chol"]  # (chain, draw, dim, dim)
    lam = np.zeros((*chol.shape[:2], n_items, dims))
    lam[..., np.arange(n_items), dim_index] = draws["slope"]
    if kind == "reparam":
        theta_mean = np.einsum("cdjk,cdk->cdj", chol, draws["theta_mean"])
        theta = np.swapaxes(np.einsum("cdjk,cdkm->cdjm", chol, draws["theta_deviation"]) + theta_mean[..., None], -1, -2)
        intercept = draws["d_centered"] - np.einsum("cdik,cdk->cdi", lam, theta_mean)
    else:
        theta, intercept = draws["theta"], draws["d"]
    return {"loading": (("item", "dim"), lam), "intercept": (("item",), intercept), "theta": (("model", "dim"), theta),
            "factor_correlation": (("dim", "dim_bis"), chol @ np.swapaxes(chol, -1, -2))}


def _simulate_dif(models: int, items: int, seed: int, missing: float):
    """Residual family-DIF responses: offsets a_i theta_m, easiness N(0, 1), family effects ZeroSumNormal(.5)
    over DIF_FAMILIES families (model m in family m mod DIF_FAMILIES); MCAR missing cells."""
    from bayesirt.data import make_responses

    rng = np.random.default_rng(seed)
    offsets = np.outer(np.exp(rng.normal(0.0, 0.5, items)), rng.normal(0.0, 1.0, models))
    b = rng.normal(0.0, 1.0, items)
    raw = rng.normal(0.0, 0.5, (items, DIF_FAMILIES))
    delta = raw - raw.mean(axis=1, keepdims=True)
    family = np.arange(models) % DIF_FAMILIES
    p = 1.0 / (1.0 + np.exp(-(b[:, None] + offsets + delta[:, family])))
    y = (rng.random((items, models)) < p).astype(float)
    y[_missing_cells(rng, y.shape, missing)] = np.nan
    responses = make_responses(y, item_id=[f"i{i:04d}" for i in range(items)],
                               model_id=[f"m{m:03d}" for m in range(models)],
                               family=[f"f{f}" for f in family], name="dif-sim")
    return responses, {"offsets": offsets, "family": family}


def _fit_dif(responses, extra, args):
    """The audit's public call; which model nutpie sampled is not in its settings, so it is recorded here
    (attribute ``nutpie_model``) by watching whether the call went to the direct model's sampler."""
    from unittest import mock

    from bayesirt.audit.bayes import posterior
    from bayesirt.data.responses import MISSING

    y = responses["responses"].values
    direct = getattr(posterior, "sample_family_dif", None)
    with mock.patch.object(posterior, "sample_family_dif", wraps=direct) if direct else mock.MagicMock() as spy:
        tree = posterior.fit_family_dif_posterior(
            np.where(y == MISSING, 0, y), y != MISSING, extra["offsets"], extra["family"], DIF_FAMILIES,
            method="nuts", draws=args.draws, tune=args.tune, chains=args.chains, seed=args.seed,
            easiness_prior="normal", item_ids=responses["item"].values,
            family_names=[f"f{f}" for f in range(DIF_FAMILIES)])
    tree.attrs["nutpie_model"] = "direct" if direct and spy.called else "pymc"
    return tree


def _dif_inputs(responses, extra):
    return {"offsets": extra["offsets"].astype(np.float32), "family": extra["family"]}, {"n_families": DIF_FAMILIES}


def _dif_posterior(draws: dict, kind: str, responses, extra) -> dict:
    delta = draws["delta"] if kind == "reparam" else draws["delta_raw"] - draws["delta_raw"].mean(-1, keepdims=True)
    return {"easiness": (("item",), draws["b"]), "family_effect": (("item", "family"), delta)}


_PL_VARIABLES = ("theta", "discrimination", "intercept")
FAMILIES = {
    **{spec: Family(_simulate_pl(spec), _fit_spec(spec), PL_MODELS, _no_inputs(spec), _pl_posterior, _PL_VARIABLES,
                    "rasch.toml" if spec == "1pl" else f"{spec}.toml") for spec in ("1pl", "2pl", "3pl", "4pl")},
    "2pl-hierarchical": Family(_simulate_pl("2pl"), _fit_spec("2pl-hierarchical"), HIERARCHICAL_MODELS,
                               _no_inputs("2pl-hierarchical"), _hierarchical_posterior, (*_PL_VARIABLES, *HIERARCHY),
                               "2pl-hierarchical.toml"),
    "mirt": Family(_simulate_mirt(False), _fit_spec("mirt"), MIRT_MODELS, _mirt_inputs, _mirt_posterior,
                   ("theta", "loading", "intercept"), "mirt.toml"),
    "mirt-confirmatory": Family(_simulate_mirt(True), _fit_spec("mirt-confirmatory"), CONFIRMATORY_MODELS,
                                _confirmatory_inputs, _confirmatory_posterior,
                                ("theta", "loading", "intercept", "factor_correlation"), "mirt-confirmatory.toml"),
    "dif": Family(_simulate_dif, _fit_dif, DIF_MODELS, _dif_inputs, _dif_posterior, ("easiness", "family_effect"),
                  "(bayesirt/models/family_dif.py, easiness_prior='normal')"),
}


def agreement(bayesirt_summary: dict, peer_summary: dict) -> dict:
    """How close two samplers' posteriors of the same data are, per reported variable: the correlation of
    their posterior means over the elements that vary in both (None for a variable with fewer than 3, such
    as a scalar), and the largest difference of means in bayesirt's posterior sds (``max_z``: every element,
    scalars too; Monte Carlo error alone gives about sqrt(1 / ESS + 1 / ESS') per element, the largest of
    many elements 3-4 times that); ``min_corr`` and ``max_z`` over the variables."""
    by_var, z_by_var = {}, {}
    for name, b in bayesirt_summary.items():
        p = peer_summary.get(name) or {"mean": np.full(np.shape(b["mean"]), np.nan), "sd": b["sd"]}
        x, y, sd = (np.ravel(np.asarray(v, dtype=float)) for v in (b["mean"], p["mean"], b["sd"]))
        keep = np.isfinite(x) & np.isfinite(y)
        by_var[name] = float(np.corrcoef(x[keep], y[keep])[0, 1]) \
            if keep.sum() >= 3 and np.std(x[keep]) > 0 and np.std(y[keep]) > 0 else None
        z = np.abs(x - y)[keep & (sd > 0)] / sd[keep & (sd > 0)]
        z_by_var[name] = float(z.max()) if z.size else None
    corrs, zs = [v for v in by_var.values() if v is not None], [v for v in z_by_var.values() if v is not None]
    return {"min_corr": min(corrs) if corrs else None, "by_var": by_var,
            "max_z": max(zs) if zs else None, "max_z_by_var": z_by_var}


def posterior_means(post, variables) -> dict:
    """Posterior means and sds of the reported variables as nested lists (JSON); elements constant over the
    draws (sd below 1e-9: the zeros of a loading pattern, a correlation's unit diagonal) as NaN."""
    out = {}
    for v in variables:
        x = post[v].values
        sd = x.std(axis=(0, 1))
        constant = sd < 1e-9
        out[v] = {"mean": np.where(constant, np.nan, x.mean(axis=(0, 1))).tolist(),
                  "sd": np.where(constant, np.nan, sd).tolist()}
    return out


def describe(name: str) -> str:
    """One line for the Markdown: the family's spec and its reported variables."""
    f = FAMILIES[name]
    return f"{name}: spec {f.spec_file}; min bulk ESS over {', '.join(f.variables)}"


__all__ = ["FAMILIES", "Family", "agreement", "posterior_means", "describe"]
