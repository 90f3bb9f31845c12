"""PyMC builder for the unidimensional logistic family (1PL-4PL) from an ``IRTSpec``.

    P(y_im = 1) = c_i + (1 - c_i - s_i) * sigmoid(a_i * theta_m + d_i),   b_i = -d_i / a_i

The likelihood runs over observed cells only (missing cells carry zero weight; nothing is imputed).
It is written as one fused ``pm.Potential`` over the dense item x model matrix instead of a
``pm.Bernoulli`` per cell, and abilities are sampled as their mean plus a zero-sum deviation with
the ability shift moved into the item locations (an exact reparameterization that removes the
location ridge; ``tests/test_logistic.py`` checks the log-density against the naive iid
``pm.Bernoulli`` model up to a constant, and a SciPy reference). One logp + gradient
evaluation costs about half as much (9.6 vs 20.1 ms at 1,000 x 300, in both PyTensor's C backend
and nutpie's numba backend), and the minimum bulk ESS per second of NUTS is 51x the naive PyMC
model's (71x per CPU second; ``benchmarks/results/nuts_2pl.md``). Pointwise log-likelihoods for LOO are
computed from the posterior by :func:`pointwise_log_likelihood`, chunked, in long format.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import xarray as xr

from bayesirt.data.responses import MISSING, observed_cells
from bayesirt.models.kernels import logistic_loglik
from bayesirt.models.response import log_likelihood
from bayesirt.models.specs import IRTSpec, Prior
from bayesirt.utils.validation import parameter_error

__all__ = ["build_logistic", "pointwise_log_likelihood", "log_likelihood_group", "prior_rv",
           "fused_loglik", "with_difficulty", "ITEM_PARAMETERS", "DENSE_LOG_LIKELIHOOD_UP_TO"]

#: Item parameters a fitted logistic spec may report, in display order.
ITEM_PARAMETERS = ("discrimination", "difficulty", "intercept", "guessing", "slip")


def _scaled_prior_params(name: str, prior: Prior, g) -> dict:
    """:func:`prior_params` of a location prior in units of the slope scale ``g`` (``build_logistic``'s
    scale-free coordinates): a number times g; a learned hyperparameter sampled as ``{name}_{key}_scaled``,
    g times it (its hyperprior's parameters times g), with the hyperparameter itself a Deterministic.
    ``g = 1.0`` (not scale-free): :func:`prior_params`."""
    if isinstance(g, float):
        return prior_params(name, prior)
    params = {}
    for key, value in prior.params.items():
        if isinstance(value, Prior):
            scaled_prior = Prior(value.distribution, {k: g * v for k, v in value.params.items()})
            scaled = prior_rv(f"{name}_{key}_scaled", scaled_prior)
            pm.Deterministic(f"{name}_{key}", scaled / g)
            params[key] = scaled
        else:
            params[key] = g * value
    return params


def prior_params(name: str, prior: Prior) -> dict:
    """The hyperparameters of a spec prior: numbers, or for a hierarchical prior the scalar random
    variables ``{name}_mu`` / ``{name}_sigma`` of its hyperpriors (created in the model context)."""
    return {k: prior_rv(f"{name}_{k}", v) if isinstance(v, Prior) else v for k, v in prior.params.items()}


def prior_rv(name: str, prior: Prior, dims=None):
    """The PyMC random variable of a spec prior (distributions validated by ``bayesirt.models.specs``);
    a hierarchical prior (a hyperparameter that is itself a prior) also creates its hyperparameters
    (centred: ``name ~ Normal(name_mu, name_sigma)``)."""
    p = prior_params(name, prior)
    match prior.distribution:
        case "normal":
            return pm.Normal(name, mu=p["mu"], sigma=p["sigma"], dims=dims)
        case "lognormal":
            return pm.LogNormal(name, mu=p["mu"], sigma=p["sigma"], dims=dims)
        case "halfnormal":
            return pm.HalfNormal(name, sigma=p["sigma"], dims=dims)
        case "beta":
            return pm.Beta(name, alpha=p["alpha"], beta=p["beta"], dims=dims)
    raise AssertionError(f"unvalidated distribution {prior.distribution!r}")  # specs.py validates


def build_logistic(responses: xr.Dataset, spec: IRTSpec, *, batch_size: int | None = None,
                   fused_kernel: bool = False) -> pm.Model:
    """Build the ``pm.Model`` of a 1PL-4PL spec for a response Dataset.

    Parameters
    ----------
    responses : xarray.Dataset
        The response data (``bayesirt.data``): ``responses`` (item, model) int8, missing = -1.
    spec : IRTSpec
        From :func:`bayesirt.models.specs.load_spec`.
    batch_size : int, optional
        Observed cells per evaluation, for minibatch ADVI: the likelihood of about this many
        observed cells, drawn anew at every evaluation as random blocks of consecutive cells of
        a fixed shuffled order (see ``_long_loglik``) and scaled to the whole matrix, an unbiased
        estimate of the full log-likelihood.
        Default: every observed cell. Only for stochastic optimization; NUTS and MAP need the
        exact likelihood.
    fused_kernel : bool, default False
        For a dense matrix without asymptotes (1PL/2PL, full likelihood): the likelihood as one
        compiled Op that returns its value and gradient in one pass
        (:class:`bayesirt.models.kernels.LogisticLoglik`) instead of the PyTensor graph of
        :func:`fused_loglik` (the same values to rounding; ``tests/test_kernels.py``). ``fit`` sets it
        for NUTS with nutpie, where one logp + gradient at 1,000 x 300 costs about a twelfth (0.51
        against 6.35 ms of CPU; ``benchmarks/results/nuts_stan.md`` at ad3dc67).
        Ignored otherwise.

    Returns
    -------
    pymc.Model
        Variables ``theta`` (model), ``discrimination`` (item, or scalar for a common
        slope), ``intercept`` and ``difficulty`` (item), and ``guessing``/``slip`` (item) when
        declared. NUTS samples ``theta_mean``, ``theta_deviation`` (zero-sum over models; for a
        common slope ``theta_deviation_scaled``, the deviation times the slope),
        ``discrimination``, ``intercept_centered`` (or ``difficulty_centered``) and the
        asymptotes; ``theta``, ``intercept`` and ``difficulty`` are exact Deterministics of them
        with the spec's priors (see the comment in the body and ``tests/test_logistic.py``). Item
        slopes with a learned scale g (``IRTSpec.learned_slope_scale``) are sampled in units of it:
        the slope's hyperparameters, ``theta_mean_scaled``, ``theta_deviation_scaled``,
        ``discrimination_relative`` (a / g), then the location's hyperparameters and
        ``intercept_centered`` or, with the difficulty's learned hyperparameters times g,
        ``difficulty_centered_scaled``.
        The attribute ``reported_variables`` lists what a fit's posterior keeps (the sampler's
        own coordinates are dropped).
    """
    y = responses["responses"].values
    observed = y != MISSING
    coords = {"item": responses["item"].values, "model": responses["model"].values}
    with pm.Model(coords=coords) as pm_model:
        # theta ~ iid Normal(mu, sigma) is sampled as its sample mean plus a zero-sum deviation:
        #   theta = theta_mean + theta_deviation,  theta_mean ~ N(mu, sigma / sqrt(n)),
        #   theta_deviation ~ ZeroSumNormal(sigma)
        # (the same joint density up to a constant). A common shift of all abilities against all
        # intercepts leaves the likelihood unchanged and is pinned only by this prior, a ridge
        # along which NUTS mixes slowly (posterior corr(mean theta, mean d) -0.98 at 300 x 1,000,
        # min bulk ESS 25 of 2,000). Moving the shift into the location parameters removes it from
        # the likelihood exactly: with d = intercept_centered - a * theta_mean (unit Jacobian),
        # a * theta + d = a * theta_deviation + intercept_centered, and theta_mean remains only in
        # the priors. Likewise b = difficulty_centered + theta_mean in the difficulty form.
        tp = spec.priors["theta"].params
        n_models = len(coords["model"])
        # (Python floats, not NumPy float64, so the graph follows floatX)
        mean_sigma = float(tp["sigma"] / np.sqrt(n_models))
        free = spec.learned_slope_scale
        if free:
            # Item slopes with a learned scale g (exp of a log-normal's mu, or a half-normal's sigma): the
            # likelihood is unchanged by theta -> k theta, b -> k b, a -> a / k, and once g is learned only
            # the abilities' prior pins that direction, along which every ability, slope and difficulty
            # move together (200 x 500: bulk ESS of discrimination_mu 18-26 of 1,000, R-hat up to 1.13;
            # benchmarks/results/hierarchical_scale_plain.md). Sampled instead in units of g:
            #   m = g theta_mean ~ N(g mu, g sigma / sqrt(n)),  u = g theta_deviation ~ ZeroSumNormal(g sigma),
            #   r = a / g ~ LogNormal(0, sigma_a) (or HalfNormal(1)),
            #   difficulty form: beta = g b_centered ~ N(g mu_b - m, g sigma_b), its learned hyperparameters
            #   as g mu_b ~ N(g mu', g sigma'), g sigma_b ~ HalfNormal(g sigma') (the intercept is unitless),
            # an exact change of variables in which the likelihood, r (u - beta) or r u + intercept_centered,
            # does not hold g: g follows the spread of u alone, and the likelihood's remaining scale direction
            # (u and beta times k, r over k) is pinned by all slopes' prior, not by g (bulk ESS of g 608-930,
            # R-hat <= 1.00 with the direct model's settings: results/hierarchical_scale.md;
            # tests/test_logistic.py checks the log density).
            dp = prior_params("discrimination", spec.priors["discrimination"])
            lognormal = spec.priors["discrimination"].distribution == "lognormal"
            g = pt.exp(dp["mu"]) if lognormal else dp["sigma"]
            m = pm.Normal("theta_mean_scaled", mu=g * tp["mu"], sigma=g * mean_sigma)
            dev_lik = pm.ZeroSumNormal("theta_deviation_scaled", sigma=g * tp["sigma"], dims="model")
            a_lik = (pm.LogNormal("discrimination_relative", mu=0.0, sigma=dp["sigma"], dims="item") if lognormal
                     else pm.HalfNormal("discrimination_relative", sigma=1.0, dims="item"))
            theta_mean, theta_dev = m / g, dev_lik / g
            a = pm.Deterministic("discrimination", g * a_lik, dims="item")
        else:
            g = 1.0
            theta_mean = m = pm.Normal("theta_mean", mu=tp["mu"], sigma=mean_sigma)
        if spec.discrimination_structure == "common":
            # One slope scales every ability: a * theta_deviation is what the responses pin down, and its
            # norm only through a * |theta_deviation|, so in (log a, theta_deviation) the posterior is a thin
            # curved ridge that a diagonal mass matrix crosses slowly (200 x 500: min bulk ESS 7-70 of
            # 1,000, the slope's). The scaled deviation u = a * theta_deviation ~ ZeroSumNormal(a * sigma)
            # is sampled instead (Jacobian a^(n - 1) inside its density): the likelihood no longer holds a,
            # whose posterior given u is sharp and nearly independent of it. theta = theta_mean + u / a.
            a = prior_rv("discrimination", spec.priors["discrimination"])
            scaled = pm.ZeroSumNormal("theta_deviation_scaled", sigma=a * tp["sigma"], dims="model")
            theta_dev = scaled / a
            a_lik, dev_lik = pt.constant(1.0, dtype=pytensor.config.floatX), scaled  # the likelihood's slope, deviation
        elif not free:
            theta_dev = dev_lik = pm.ZeroSumNormal("theta_deviation", sigma=tp["sigma"], dims="model")
        pm.Deterministic("theta", theta_mean + theta_dev, dims="model")
        if spec.discrimination_structure == "item" and not free:
            a = a_lik = prior_rv("discrimination", spec.priors["discrimination"], dims="item")
        elif spec.discrimination_structure == "fixed":
            a = a_lik = pm.Deterministic("discrimination", pt.constant(spec.discrimination_value, dtype=pytensor.config.floatX))
        if spec.location == "intercept":
            # a * theta_mean = r * m in the scale-free coordinates
            shift = a_lik * m if free else a * theta_mean
            lp = prior_params(spec.location, spec.priors[spec.location])
            d_c = pm.Normal("intercept_centered", mu=lp["mu"] + shift, sigma=lp["sigma"], dims="item")
            d = pm.Deterministic("intercept", d_c - shift, dims="item")
            pm.Deterministic("difficulty", -d / a, dims="item")
        else:
            lp = _scaled_prior_params(spec.location, spec.priors[spec.location], g)
            name = "difficulty_centered_scaled" if free else "difficulty_centered"
            b_c = pm.Normal(name, mu=lp["mu"] - m, sigma=lp["sigma"], dims="item")
            b = pm.Deterministic("difficulty", (b_c + m) / g, dims="item")
            pm.Deterministic("intercept", -a * b, dims="item")
            d_c = -(a_lik if free else a) * b_c
        c = prior_rv("guessing", spec.priors["guessing"], dims="item") if spec.has_guessing else None
        s = prior_rv("slip", spec.priors["slip"], dims="item") if spec.has_slip else None

        if batch_size is None and observed.mean() >= DENSE_FROM and fused_kernel and c is None and s is None:
            # one compiled pass for value and gradient; the graph of the next branch is its test oracle
            a_vec = a_lik if a_lik.ndim == 1 else pt.broadcast_to(a_lik, (len(coords["item"]),))
            loglik = logistic_loglik(a_vec, dev_lik, d_c, y)
        elif batch_size is None and observed.mean() >= DENSE_FROM:
            eta = (a_lik[:, None] if a_lik.ndim == 1 else a_lik) * dev_lik[None, :] + d_c[:, None]
            column = lambda v: None if v is None else v[:, None]  # noqa: E731
            # The responses (and the mask of a matrix with missing cells) are shared variables, not
            # constants: numba embeds an array constant over 1 MB as a dynamic global, which keeps
            # the compiled function out of PyTensor's on-disk numba cache (a 300 x 1,000 matrix is
            # 2.4 MB). As inputs, a later fit of a model of the same structure and size reuses the
            # compiled ADVI step and loss (about 4 s of compilation at 300 x 1,000).
            floatx = pytensor.config.floatX
            y_obs = pytensor.shared((y == 1).astype(floatx), name="responses_correct")
            weight = None if observed.all() else pytensor.shared(observed.astype(floatx), name="responses_observed")
            loglik = fused_loglik(eta, column(c), column(s), y_obs, weight)
        else:
            loglik = _long_loglik(y, a_lik, dev_lik, d_c, c, s, batch_size)
        pm.Potential("response_loglik", loglik)
    # read by the ADVI stopping rule (bayesirt.inference.fitting)
    pm_model.minibatch, pm_model.n_cells = batch_size is not None, int(observed.sum())
    # what a fit's posterior group keeps: the spec's parameters, with the intercept that every
    # consumer of a posterior reads (the difficulty too when the spec puts its prior there;
    # with_difficulty derives it otherwise)
    pm_model.reported_variables = ["theta", "discrimination", "intercept"] \
        + ["difficulty"] * (spec.location == "difficulty") + ["guessing"] * spec.has_guessing + ["slip"] * spec.has_slip \
        + [f"{name}_{k}" for name in ("discrimination", spec.location) if name in spec.priors
           for k, v in spec.priors[name].params.items() if isinstance(v, Prior)]
    return pm_model


def with_difficulty(posterior: xr.Dataset) -> xr.Dataset:
    """The posterior with the difficulty ``b = -d / a`` of every draw added when it is not stored
    (a fit of a slope-intercept spec stores ``intercept`` only; see :func:`build_logistic`)."""
    if "difficulty" in posterior or "intercept" not in posterior or "discrimination" not in posterior:
        return posterior  # stored already, or not a 1PL-4PL posterior
    return posterior.assign(difficulty=-posterior["intercept"] / posterior["discrimination"])


#: Smallest observed share of the matrix for which the likelihood runs over the dense matrix;
#: sparser matrices run over their observed cells in long format. One logp + gradient on 2,000 x
#: 1,000 cost 8% more per observed cell in long format when complete, and 26% less at 70%
#: observed (``benchmarks/results/scale_advi.md``); long format also needs 9 bytes per observed
#: cell against 16 per cell for the dense float64 responses and mask.
DENSE_FROM = 0.8


#: Cells per minibatch block (see ``_long_loglik``).
MINIBATCH_BLOCK = 4096


def _long_loglik(y: np.ndarray, a, theta_dev, d_c, c, s, batch_size: int | None):
    """The response log-likelihood over observed cells in long format (int32 indices, int8
    responses, held as shared variables), or its minibatch estimate (see ``build_logistic``).

    Minibatches are drawn as blocks of ``MINIBATCH_BLOCK`` consecutive cells of a fixed shuffled
    order of the cells (blocks uniformly with replacement; the last block padded with zero-weight
    cells): reading a block is sequential, where drawing single cells at random from 70 M cells
    waited on memory for every cell. Every cell is in one block, so the scaled sum is unbiased.
    """
    cells = observed_cells(y)
    n_cells = cells[0].size
    if batch_size is None:
        item, model, response = (pytensor.shared(v, borrow=True) for v in cells)
        scale, weight = 1.0, None
    else:
        if batch_size > n_cells:
            raise parameter_error("batch_size", "fit", f"an integer <= {n_cells} (the observed cells), or None for the "
                                  "full likelihood", batch_size)
        block = min(MINIBATCH_BLOCK, batch_size)
        n_blocks, n_draw = -(-n_cells // block), max(1, round(batch_size / block))
        order = np.random.default_rng(0).permutation(n_cells)  # a fixed layout of the data, not a draw of the fit
        pad = n_blocks * block - n_cells
        item, model, response = (pytensor.shared(np.concatenate([v[order], np.zeros(pad, v.dtype)]), borrow=True)
                                 for v in cells)
        valid = pytensor.shared(np.concatenate([np.ones(n_cells, np.int8), np.zeros(pad, np.int8)]), borrow=True)
        starts = pm.Minibatch(pytensor.shared(np.arange(n_blocks, dtype=np.int64) * block), batch_size=n_draw)
        index = (starts[:, None] + pt.arange(block)[None, :]).ravel()
        item, model, response, weight = item[index], model[index], response[index], pt.cast(valid[index], pytensor.config.floatX)
        scale = n_blocks / n_draw
    per_item = lambda v: None if v is None else v[item]  # noqa: E731
    a_cell = a[item] if a.ndim == 1 else a
    eta = a_cell * theta_dev[model] + d_c[item]
    y_obs = pt.cast(response, pytensor.config.floatX)
    if weight is not None:
        return scale * fused_loglik(eta, per_item(c), per_item(s), y_obs * weight, weight)
    return scale * fused_loglik(eta, per_item(c), per_item(s), y_obs)


def fused_loglik(eta, c, s, y_obs, observed: np.ndarray | None = None):
    """Sum of Bernoulli log-likelihoods over observed cells, as one PyTensor expression.

    ``eta`` is the logit tensor (an (item, model) matrix, or one value per cell in long format);
    ``c`` and ``s`` the guessing and slip asymptotes broadcastable to it, or None; ``y_obs`` is
    1.0 where a response is correct; ``observed`` marks observed cells (None: all are), as a
    boolean array or a 0/1 weight tensor.
    """
    weight = None if observed is None or (isinstance(observed, np.ndarray) and observed.all()) else observed
    if isinstance(weight, np.ndarray):
        weight = weight.astype(pytensor.config.floatX)
    y_miss = (1.0 - y_obs) if weight is None else weight - y_obs  # 1 where an observed response is 0
    if c is None and s is None:
        # log p = eta - softplus(eta), log(1 - p) = -softplus(eta)
        sp = pt.softplus(eta)
        return pt.sum(y_obs * eta) - (pt.sum(sp) if weight is None else pt.sum(weight * sp))
    scale = 1.0 - (c if s is None else s if c is None else c + s)
    # With an asymptote present (c > 0 or s > 0: Beta priors have open support) P stays inside
    # (c, 1 - s), so the direct log is finite and about 3.7x cheaper than a logaddexp form; without
    # one, the log-sigmoid form keeps the tail exact.
    if c is None:
        log_p = pt.log(scale) - pt.softplus(-eta)
    else:
        log_p = pt.log(c + scale * pt.sigmoid(eta))
    if s is None:
        log_q = pt.log(scale) - pt.softplus(eta)
    else:
        log_q = pt.log(s + scale * pt.sigmoid(-eta))
    return pt.sum(y_obs * log_p) + pt.sum(y_miss * log_q)


def _cell_log_likelihoods(posterior: xr.Dataset, items: np.ndarray, models: np.ndarray, y_cell: np.ndarray,
                          chunk_cells: int):
    """Yield ``(slice, values)``: the (sample, cell) log-likelihoods of consecutive chunks of the
    given cells, about ``chunk_cells`` draw-cells at a time."""
    n_samples = posterior.sizes["chain"] * posterior.sizes["draw"]

    def draws(name, default):
        """(sample, entity, dim) array; a missing parameter is a constant, a scalar one broadcasts."""
        if name not in posterior:
            return np.full((n_samples, 1, 1), default)
        return posterior[name].values.reshape(n_samples, -1, posterior[name].sizes.get("dim", 1))

    mirt = "loading" in posterior
    theta = draws("theta", 0.0)
    a = draws("loading" if mirt else "discrimination", 1.0)
    d, c, s = draws("intercept", 0.0)[..., 0], draws("guessing", 0.0)[..., 0], draws("slip", 0.0)[..., 0]
    pick = lambda v, idx: v[:, idx] if v.shape[1] > 1 else v[:, :1]  # noqa: E731 (common slope / absent)
    step = max(1, chunk_cells // max(1, n_samples))
    for start in range(0, items.size, step):
        sl = slice(start, start + step)
        ii, mm = items[sl], models[sl]
        eta = (pick(a, ii) * theta[:, mm]).sum(axis=-1) + pick(d, ii)
        yield sl, log_likelihood(y_cell[sl], eta, pick(c, ii), pick(s, ii))


def pointwise_log_likelihood(posterior: xr.Dataset, responses: xr.Dataset, *, chunk_cells: int = 2_000_000) -> xr.DataArray:
    """Log-likelihood of every observed response under every posterior draw, in long format.

    Works for the 1PL-4PL posteriors (``theta``, ``discrimination``, ``intercept``, optional
    ``guessing``/``slip``) and MIRT posteriors (``theta`` (model, dim), ``loading`` (item, dim)).
    Returns a DataArray with dims (chain, draw, cell): one ``cell`` per observed response, with
    coordinates ``item`` and ``model`` on it, so LOO can group cells by model. Cells are processed
    in chunks of about ``chunk_cells`` draw-cells so memory stays bounded on large matrices.
    """
    items, models, y_cell = observed_cells(responses["responses"].values)
    n_chain, n_draw = posterior.sizes["chain"], posterior.sizes["draw"]
    out = np.empty((n_chain * n_draw, items.size))
    for sl, values in _cell_log_likelihoods(posterior, items, models, y_cell.astype(bool), chunk_cells):
        out[:, sl] = values
    return xr.DataArray(
        out.reshape(n_chain, n_draw, -1),
        dims=("chain", "draw", "cell"),
        coords={
            "chain": posterior["chain"].values,
            "draw": posterior["draw"].values,
            "item": ("cell", responses["item"].values[items]),
            "model": ("cell", responses["model"].values[models]),
        },
        name="responses",
    )


#: The ``log_likelihood`` group is stored densely, (chain, draw, item, model) with NaN where no
#: response was observed (ArviZ's layout), unless that is both above this many values and more
#: than twice the observed cells (under half of the matrix observed): then in long format, one
#: ``cell`` per observed response with ``item`` and ``model`` coordinates on it.
DENSE_LOG_LIKELIHOOD_UP_TO = 20_000_000


def log_likelihood_group(posterior: xr.Dataset, responses: xr.Dataset, *, chunk_cells: int = 2_000_000) -> xr.Dataset:
    """The ``log_likelihood`` group of a fit: ``responses`` for every draw and observed response.

    Dense (chain, draw, item, model) with NaN at missing cells, so ArviZ labels pointwise LOO
    values by item and model; long (chain, draw, cell) for sparse matrices too large to hold
    densely (:data:`DENSE_LOG_LIKELIHOOD_UP_TO`). The layout is recorded in the attribute
    ``layout`` ("dense" or "long").
    """
    y = responses["responses"].values
    n_chain, n_draw = posterior.sizes["chain"], posterior.sizes["draw"]
    items, models, y_cell = observed_cells(y)
    dense_values = n_chain * n_draw * y.size
    if dense_values > DENSE_LOG_LIKELIHOOD_UP_TO and y.size > 2 * items.size:
        long = pointwise_log_likelihood(posterior, responses, chunk_cells=chunk_cells)
        return long.to_dataset().assign_attrs(layout="long")
    out = np.full((n_chain * n_draw, *y.shape), np.nan)
    for sl, values in _cell_log_likelihoods(posterior, items, models, y_cell.astype(bool), chunk_cells):
        out[:, items[sl], models[sl]] = values
    coords = {"chain": posterior["chain"].values, "draw": posterior["draw"].values,
              "item": responses["item"].values, "model": responses["model"].values}
    return xr.Dataset({"responses": (("chain", "draw", "item", "model"), out.reshape(n_chain, n_draw, *y.shape))},
                      coords=coords, attrs={"layout": "dense"})
