"""Predictive checks of a 1PL-4PL spec: what its priors imply (prior predictive) and where a
fitted model misfits (posterior predictive).

Replicated response matrices are drawn from the posterior (one per retained draw, observed cells
only: the missing pattern is part of the design). Test quantities T and their posterior predictive
p-values ppp = Pr(T(y_rep) >= T(y)), with ties counted half (mid-p), so ppp is about uniform when
the model fits and near 0 or 1 where it does not (Gelman, Meng and Stern 1996):

- per item: proportion correct, and the item-rest correlation (point-biserial of the item with
  each model's proportion correct on the other observed items);
- per model: accuracy;
- globally: the sd of model accuracies (the spread of the score distribution);
- item fit, posterior predictive analogues of Rasch outfit and infit and of grouped item-fit
  chi-squares such as Yen's Q1 and Orlando and Thissen's S-X2 (Sinharay 2006): discrepancies
  D(y, params) computed on the observed data and on the replicate *under the same draw*:
  outfit = mean_m z_im^2, infit = sum_m (y - P)^2 / sum_m P(1 - P), with
  z = (y - P) / sqrt(P(1 - P)); X2 = sum_g r_g^2 over ``groups`` equal-count groups of models
  ordered by proportion correct (observed scores for the observed data, replicated scores for the
  replicate, as S-X2 groups), with r_g = (O_g - E_g) / sqrt(V_g) (observed and expected correct,
  binomial variance); and the curvature C = sum_g q_g r_g, with q the orthonormal quadratic
  contrast over the ordered groups. X2 sees any misshapen item curve; C is its one-degree-of-
  freedom part aimed at missing asymptotes: a curve that flattens at low scores (a lower
  asymptote, guessing, that a 2PL lacks) leaves residuals above zero at both ends and below in
  the middle, so C > 0; one that flattens at high scores (slip) gives C < 0. On a 2PL fitted to
  3PL data (tests/test_predictive.py) C found the guessing items that X2 missed. Outfit sees
  isolated unexpected responses. Grouping by ability draws instead of scores, and discrepancies
  in the direction of the guessing score, had no power there: the abilities absorb the misfit.

An element is flagged when its ppp falls outside [alpha/2, 1 - alpha/2] for the statistics with a
direction (proportion, item-rest correlation, accuracy, curvature: two-sided) or below alpha for
outfit, infit and X2 (one-sided: only worse-than-predicted fit is misfit).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data import make_responses
from bayesirt.data.responses import MISSING, from_observed_data
from bayesirt.errors import DataError
from bayesirt.models.logistic import build_logistic
from bayesirt.models.response import response_probability

__all__ = ["posterior_predictive_check", "prior_predictive_check", "replicate_responses", "PPCResult", "DEFAULT_ALPHA"]

DEFAULT_ALPHA = 0.05
_SAMPLE = ("chain", "draw")


class PPCResult:
    """Result of :func:`posterior_predictive_check`.

    Attributes
    ----------
    replicated : xarray.Dataset
        The test quantities of every replicate (dims chain, draw and item/model): what the ppc
        job stores as the DataTree's ``ppc_statistics`` group (dim ``replicate``).
    items, models : pandas.DataFrame
        Per item (model): observed statistic, replicated mean and 90% interval, ppp, flag.
    global_checks : pandas.DataFrame
        One row per global statistic.
    alpha : float
    """

    def __init__(self, replicated, items, models, global_checks, alpha):
        self.replicated, self.items, self.models = replicated, items, models
        self.global_checks, self.alpha = global_checks, alpha

    @property
    def worst_items(self) -> pd.DataFrame:
        """Items by ``fit_ppp``, worst first."""
        return self.items.sort_values("fit_ppp", kind="stable")


def _draw_parameters(post: xr.Dataset, n: int, rng) -> tuple[dict[str, np.ndarray], np.ndarray]:
    stacked = post.stack(sample=_SAMPLE).transpose("sample", ...)
    total = stacked.sizes["sample"]
    pick = np.sort(rng.choice(total, size=min(n, total), replace=False))
    out = {}
    for name, default in (("theta", 0.0), ("discrimination", 1.0), ("intercept", 0.0), ("guessing", 0.0), ("slip", 0.0)):
        out[name] = stacked[name].values[pick] if name in stacked else np.full((pick.size, 1), default)
    if out["discrimination"].ndim == 1:  # common slope: one per draw
        out["discrimination"] = out["discrimination"][:, None]
    return out, pick


def _item_rest_correlation(y: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Correlation of each item with the models' proportion correct on the other observed items.

    ``y`` (..., item, model) in {0, 1} with unobserved cells 0; ``observed`` (item, model)."""
    n_obs = observed.sum(axis=0)  # per model
    total = y.sum(axis=-2)  # (..., model)
    rest_n = n_obs[None, :] - observed  # (item, model)
    with np.errstate(invalid="ignore", divide="ignore"):
        rest = (total[..., None, :] - y) / rest_n
    w = observed & (rest_n > 0)
    rest = np.where(w, rest, 0.0)
    k = w.sum(axis=-1)
    my, mr = (y * w).sum(-1) / k, (rest * w).sum(-1) / k
    cy, cr = np.where(w, y - my[..., None], 0.0), np.where(w, rest - mr[..., None], 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (cy * cr).sum(-1) / np.sqrt((cy**2).sum(-1) * (cr**2).sum(-1))


def _ability_groups(theta: np.ndarray, n_groups: int) -> np.ndarray:
    """One-hot (draw, model, group): models split into ``n_groups`` equal-count ability groups
    by each draw's abilities."""
    rank = np.argsort(np.argsort(theta, axis=-1, kind="stable"), axis=-1)
    group = rank * n_groups // theta.shape[-1]
    return (group[..., None] == np.arange(n_groups)).astype(float)


def _quadratic_contrast(n_groups: int) -> np.ndarray:
    """Orthonormal quadratic contrast over ``n_groups`` ordered, equally weighted groups."""
    x = np.arange(n_groups) - (n_groups - 1) / 2
    q = x**2 - (x**2).mean()  # orthogonal to the constant; to the linear term by symmetry
    return q / np.linalg.norm(q)


def _fit_discrepancies(y, p, observed, groups) -> tuple[np.ndarray, ...]:
    """Outfit, infit, grouped chi-square and curvature of every item, per draw."""
    var = p * (1.0 - p)
    w = observed.astype(float)
    resid = (y - p) * w
    outfit = (resid**2 / np.maximum(var, 1e-12)).sum(-1) / w.sum(-1)
    infit = (resid**2).sum(-1) / (var * w).sum(-1)
    # observed minus expected correct per ability group, over its binomial variance
    diff = np.einsum("sim,smg->sig", resid, groups)
    gvar = np.einsum("sim,smg->sig", var * w, groups)
    r = diff / np.sqrt(np.maximum(gvar, 1e-12))
    return outfit, infit, (r**2).sum(-1), r @ _quadratic_contrast(groups.shape[-1])


def _ppp(rep: np.ndarray, obs: np.ndarray) -> np.ndarray:
    """Mid-p Pr(T_rep >= T_obs) over the leading (draw) axis."""
    return (rep > obs).mean(0) + 0.5 * (rep == obs).mean(0)


def posterior_predictive_check(
    tree: xr.DataTree, *, draws: int = 500, seed: int = 0, alpha: float = DEFAULT_ALPHA, groups: int = 10,
    chunk_cells: int = 5_000_000,
) -> PPCResult:
    """Posterior predictive checks of a :func:`bayesirt.inference.fitting.fit` result.

    Parameters
    ----------
    tree : DataTree
        A fit with ``posterior`` and ``observed_data`` groups.
    draws : int
        Posterior draws used (a seeded random subset when the posterior has more).
    seed : int
        Seed of the draw subset and the replicates; same seed, same result.
    alpha : float
        Flagging level (module docstring).
    groups : int
        Ability groups of the X2 item-fit statistic (default 10, as Yen's Q1); at most the
        number of models.
    chunk_cells : int
        Draw x cell budget per chunk, bounding memory on large matrices.
    """
    if not 0 < alpha < 1:
        raise DataError(f"alpha must be between 0 and 1; got {alpha!r}")
    if "observed_data" not in tree or "posterior" not in tree:
        raise DataError("posterior predictive checks need a fit with posterior and observed_data groups")
    post = tree["posterior"].to_dataset()
    y = from_observed_data(tree)["responses"].values
    observed = y != MISSING
    y_obs = (y == 1).astype(float)
    rng = np.random.default_rng(seed)
    params, pick = _draw_parameters(post, draws, rng)
    n_draws = pick.size
    n_items, n_models = y.shape
    n_groups = min(groups, n_models)
    if n_groups < 2:
        raise DataError(f"groups must be at least 2; got {groups}")

    # observed statistics
    acc_obs = (y_obs * observed).sum(0) / observed.sum(0)
    prop_obs = (y_obs * observed).sum(1) / observed.sum(1)
    irc_obs = _item_rest_correlation(y_obs, observed)

    stats = ("outfit", "infit", "x2", "curvature")
    names = ("item_proportion", "item_rest_correlation") + tuple(f"{s}_{k}" for s in stats for k in ("rep", "obs"))
    rep = {k: np.empty((n_draws, n_items)) for k in names}
    rep["model_accuracy"] = np.empty((n_draws, n_models))
    step = max(1, chunk_cells // (n_items * n_models))
    for start in range(0, n_draws, step):
        sl = slice(start, start + step)
        p = response_probability(params["theta"][sl], params["discrimination"][sl], params["intercept"][sl],
                                 params["guessing"][sl], params["slip"][sl])
        y_rep = ((rng.random(p.shape) < p) & observed).astype(float)
        rep["item_proportion"][sl] = y_rep.sum(-1) / observed.sum(1)
        rep["model_accuracy"][sl] = y_rep.sum(-2) / observed.sum(0)
        rep["item_rest_correlation"][sl] = _item_rest_correlation(y_rep, observed)
        score_rep = y_rep.sum(-2) / observed.sum(0)
        g_rep = _ability_groups(score_rep + 1e-9 * params["theta"][sl], n_groups)
        g_obs = _ability_groups(acc_obs[None, :] + 1e-9 * params["theta"][sl], n_groups)
        for kind, values in (("rep", _fit_discrepancies(y_rep, p, observed, g_rep)),
                             ("obs", _fit_discrepancies(y_obs, p, observed, g_obs))):
            for stat, value in zip(stats, values, strict=True):
                rep[f"{stat}_{kind}"][sl] = value

    lo, hi = alpha / 2, 1 - alpha / 2

    def two_sided(ppp):
        return (ppp < lo) | (ppp > hi)

    item_ids = post["item"].values
    items = pd.DataFrame({"item": item_ids, "proportion_correct": prop_obs, "item_rest_corr": irc_obs})
    for name, obs in (("item_proportion", prop_obs), ("item_rest_correlation", irc_obs)):
        col = "proportion" if name == "item_proportion" else "item_rest_corr"
        items[f"{col}_rep_mean"] = rep[name].mean(0)
        items[f"{col}_rep_q5"], items[f"{col}_rep_q95"] = np.nanquantile(rep[name], [0.05, 0.95], axis=0)
        items[f"{col}_ppp"] = _ppp(rep[name], obs[None, :])
    for stat in stats:
        items[f"{stat}_obs_mean"] = rep[f"{stat}_obs"].mean(0)
        items[f"{stat}_ppp"] = _ppp(rep[f"{stat}_rep"], rep[f"{stat}_obs"])
    # the strongest item-fit evidence on one scale: one-sided ppp, two-sided ones doubled
    curvature_two_sided = 2 * np.minimum(items["curvature_ppp"], 1 - items["curvature_ppp"])
    items["fit_ppp"] = np.minimum(items[["outfit_ppp", "infit_ppp", "x2_ppp"]].min(axis=1), curvature_two_sided)
    flags = []
    for row in items.itertuples():
        f = [n for n, bad in (("proportion", two_sided(row.proportion_ppp)),
                              ("item-rest correlation", two_sided(row.item_rest_corr_ppp)),
                              ("outfit", row.outfit_ppp < alpha), ("infit", row.infit_ppp < alpha),
                              ("item curve (X2)", row.x2_ppp < alpha),
                              ("flattens at low scores (guessing?)", row.curvature_ppp < lo),
                              ("flattens at high scores (slip?)", row.curvature_ppp > hi)) if bad]
        flags.append(", ".join(f))
    items["flag"] = flags

    models = pd.DataFrame({"model": post["model"].values, "accuracy": acc_obs,
                           "accuracy_rep_mean": rep["model_accuracy"].mean(0)})
    models["accuracy_rep_q5"], models["accuracy_rep_q95"] = np.quantile(rep["model_accuracy"], [0.05, 0.95], axis=0)
    models["accuracy_ppp"] = _ppp(rep["model_accuracy"], acc_obs[None, :])
    models["flag"] = np.where(two_sided(models["accuracy_ppp"]), "accuracy", "")

    sd_rep, sd_obs = rep["model_accuracy"].std(-1), acc_obs.std()
    ppp_sd = float(_ppp(sd_rep, np.float64(sd_obs)))
    global_checks = pd.DataFrame([{
        "statistic": "sd of model accuracies", "observed": sd_obs, "replicated_mean": sd_rep.mean(),
        "replicated_q5": np.quantile(sd_rep, 0.05), "replicated_q95": np.quantile(sd_rep, 0.95), "ppp": ppp_sd,
        "flag": "misfit" if two_sided(ppp_sd) else "",
    }])

    coords = {"chain": [0], "draw": np.arange(n_draws), "item": item_ids, "model": post["model"].values}
    replicated = xr.Dataset(
        {
            "item_proportion": (("chain", "draw", "item"), rep["item_proportion"][None]),
            "item_rest_correlation": (("chain", "draw", "item"), rep["item_rest_correlation"][None]),
            "model_accuracy": (("chain", "draw", "model"), rep["model_accuracy"][None]),
            "outfit": (("chain", "draw", "item"), rep["outfit_rep"][None]),
            "infit": (("chain", "draw", "item"), rep["infit_rep"][None]),
            "x2": (("chain", "draw", "item"), rep["x2_rep"][None]),
            "curvature": (("chain", "draw", "item"), rep["curvature_rep"][None]),
            "accuracy_sd": (("chain", "draw"), sd_rep[None]),
        },
        coords=coords,
        attrs={"draws_used": n_draws, "seed": seed, "note": "test quantities of replicated data; draws are a random "
               "subset of the posterior pooled over chains"},
    )
    return PPCResult(replicated, items, models, global_checks, alpha)


def replicate_responses(tree: xr.DataTree, *, seed: int = 0, chunk_cells: int = 5_000_000) -> xr.Dataset:
    """One replicated response matrix per posterior draw: ArviZ's ``posterior_predictive`` group.

    ``responses`` (chain, draw, item, model), float32 0/1 with NaN where the observed data have
    no response (the missing pattern is part of the design), under the same name and labels as
    ``observed_data["responses"]``, so ``az.loo_pit`` and ArviZ's PPC plots pair them.
    Draws are simulated ``chunk_cells`` draw-cells at a time from one ``seed``.
    """
    post = tree["posterior"].to_dataset()
    y = from_observed_data(tree)["responses"].values
    observed = y != MISSING
    n_chain, n_draw = post.sizes["chain"], post.sizes["draw"]
    stacked = post.stack(sample=_SAMPLE).transpose("sample", ...)

    def values(name, default):
        if name not in stacked:
            return np.full((stacked.sizes["sample"], 1), default)
        v = stacked[name].values
        return v[:, None] if v.ndim == 1 else v  # a common slope: one per draw

    params = {k: values(k, d) for k, d in (("theta", 0.0), ("discrimination", 1.0), ("intercept", 0.0),
                                           ("guessing", 0.0), ("slip", 0.0))}
    rng = np.random.default_rng(seed)
    out = np.empty((n_chain * n_draw, *y.shape), dtype=np.float32)
    step = max(1, chunk_cells // y.size)
    for start in range(0, out.shape[0], step):
        sl = slice(start, start + step)
        p = response_probability(*(params[k][sl] for k in ("theta", "discrimination", "intercept", "guessing", "slip")))
        out[sl] = np.where(observed, rng.random(p.shape) < p, np.nan)
    coords = {"chain": post["chain"].values, "draw": post["draw"].values, "item": post["item"].values,
              "model": post["model"].values}
    return xr.Dataset({"responses": (("chain", "draw", "item", "model"), out.reshape(n_chain, n_draw, *y.shape))},
                      coords=coords, attrs={"seed": seed})


def _design_responses(n_models: int, n_items: int) -> xr.Dataset:
    return make_responses(np.zeros((n_items, n_models), dtype="int8"),
                          item_id=[f"i{i:04d}" for i in range(n_items)], model_id=[f"m{m:04d}" for m in range(n_models)])


def prior_predictive_check(
    spec, responses: xr.Dataset | None = None, *, design: tuple[int, int] | None = None, draws: int = 500,
    seed: int = 0, degenerate_share: float = 0.5, chunk_cells: int = 5_000_000,
) -> tuple[xr.Dataset, pd.DataFrame]:
    """What the spec's priors imply about data, before seeing any.

    Parameters
    ----------
    spec : IRTSpec
    responses : xarray.Dataset, optional
        Observed data: sets the design (and its missing cells) and is compared with the prior
        predictive distribution.
    design : (n_models, n_items), optional
        The design when no data are given.
    draws : int
        Prior draws, each with one simulated response matrix.
    seed : int
    degenerate_share : float
        Flag the priors when, on average over draws, more than this share of items come out all
        correct or all wrong (degenerate patterns that carry no information on the models).
    chunk_cells : int
        Draw x cell budget per chunk, bounding memory on large designs.

    Returns
    -------
    simulated : xarray.Dataset
        Per draw: ``item_proportion`` (draw, item), ``model_accuracy`` (draw, model),
        ``theta_sd``, ``degenerate_items`` (share of all-0/all-1 items).
    table : pandas.DataFrame
        One row per summary statistic: prior predictive 5/50/95% quantiles, the observed value and
        its prior predictive p (mid-p Pr(T_sim >= T_obs)) when data are given, and ``flag``.
    """
    import warnings

    import pymc as pm


    if responses is None:
        if design is None:
            raise DataError("give observed data or a design (models x items) for the prior predictive check")
        n_models, n_items = design
        if n_models < 2 or n_items < 2:
            raise DataError(f"a design needs at least 2 models and 2 items; got {n_models}x{n_items}")
        frame = _design_responses(n_models, n_items)
    else:
        frame = responses
    observed = frame["responses"].values != MISSING
    with build_logistic(frame, spec), warnings.catch_warnings():
        # the likelihood Potential plays no part in prior draws, which is what is wanted here
        warnings.filterwarnings("ignore", message="The effect of Potentials", category=UserWarning)
        names = ["theta", "discrimination", "intercept"] + ["guessing"] * spec.has_guessing + ["slip"] * spec.has_slip
        prior = pm.sample_prior_predictive(draws=draws, random_seed=seed, var_names=names).prior
    par = {k: prior[k].values[0] for k in prior.data_vars}
    par["discrimination"] = par["discrimination"].reshape(draws, -1)  # (draw, 1) for a common or fixed slope
    rng = np.random.default_rng(seed)
    n_obs_item, n_obs_model = observed.sum(1), observed.sum(0)
    prop, acc = np.empty((draws, observed.shape[0])), np.empty((draws, observed.shape[1]))
    step = max(1, chunk_cells // observed.size)
    for start in range(0, draws, step):  # chunks of draws bound memory; the random stream is the same
        sl = slice(start, start + step)
        p = response_probability(par["theta"][sl], par["discrimination"][sl], par["intercept"][sl],
                                 par["guessing"][sl] if "guessing" in par else 0.0,
                                 par["slip"][sl] if "slip" in par else 0.0)
        y = (rng.random(p.shape) < p) & observed
        prop[sl], acc[sl] = y.sum(-1) / n_obs_item, y.sum(-2) / n_obs_model
    simulated = xr.Dataset(
        {"item_proportion": (("draw", "item"), prop), "model_accuracy": (("draw", "model"), acc),
         "theta_sd": ("draw", par["theta"].std(-1)), "degenerate_items": ("draw", ((prop == 0) | (prop == 1)).mean(-1))},
        coords={"draw": np.arange(draws), "item": frame["item"].values, "model": frame["model"].values},
        attrs={"spec": spec.name, "seed": seed},
    )
    stats = {
        "mean item proportion correct": simulated["item_proportion"].mean("item").values,
        "sd of item proportions": simulated["item_proportion"].std("item").values,
        "sd of model accuracies": simulated["model_accuracy"].std("model").values,
        "share of all-0/all-1 items": simulated["degenerate_items"].values,
    }
    rows = []
    for name, values in stats.items():
        row = {"statistic": name, "prior_q5": np.quantile(values, 0.05), "prior_median": np.median(values),
               "prior_q95": np.quantile(values, 0.95), "observed": np.nan, "prior_p": np.nan, "flag": ""}
        rows.append(row)
    if responses is not None:
        y_obs = (frame["responses"].values == 1) & observed
        prop_obs, acc_obs = y_obs.sum(1) / n_obs_item, y_obs.sum(0) / n_obs_model
        observed_stats = [prop_obs.mean(), prop_obs.std(), acc_obs.std(), ((prop_obs == 0) | (prop_obs == 1)).mean()]
        for row, values, obs in zip(rows, stats.values(), observed_stats, strict=True):
            row["observed"] = obs
            row["prior_p"] = float(_ppp(values[:, None], np.array([obs]))[0])
            if not 0.005 <= row["prior_p"] <= 0.995:
                row["flag"] = "observed value outside the prior predictive range"
    degenerate = rows[-1]
    if np.mean(stats["share of all-0/all-1 items"]) > degenerate_share:
        degenerate["flag"] = (f"the priors make {np.mean(stats['share of all-0/all-1 items']):.0%} of items all-correct or "
                              "all-wrong on average; narrow the intercept/difficulty or ability prior")
    return simulated, pd.DataFrame(rows)
