"""Benchmark distillation on held-out models: adaptive, static and random short tests (SAFE Fig. 3).

For each of ``splits`` random calibration/test splits of the models (75/25 by default):

1. fit the 2PL by regularized marginal maximum likelihood on the calibration models only
   (:func:`bayesirt.frequentist.mml.fit_mml`, ``priors=True``);
2. for each item budget ``k``, give every model (calibration and test) three ``k``-item tests
   built from the calibration fit, using its real responses: an adaptive test
   (:func:`bayesirt.safety.adaptive.run_cat`, unconstrained as SAFE's), the static test
   for the calibration abilities (:func:`bayesirt.safety.adaptive.static_test`, design
   ``static_design``, default :data:`~bayesirt.safety.settings.STATIC_DESIGN`) and
   ``random_subsets`` random item sets; with ``quotas`` the static and random tests (and the CAT)
   keep per-``item_group`` quotas, as SAFE's per-ability static tests and their random baselines;
3. map each model's reduced-test score and ability estimate to a predicted full score with a
   spline regression fitted on the calibration models (:func:`score_calibration`), the same
   for every test, so that differences reflect item selection only;
4. on the test models, compare predicted and actual full scores (RMSE, Spearman) and the
   ``k``-item ability with the all-item ability under the same calibration (RMSE).

The full score (the target, one definition across the suite): for one benchmark its proportion
correct over the model's observed items; for a composite of several benchmarks (a bank pooled by
:func:`combine_benchmarks` or :func:`bayesirt.safety.scopes.pool_benchmarks`, reversed members
already 1 - y) the unweighted mean over member benchmarks of each one's proportion correct, so that
every benchmark counts equally whatever its item count (SAFE's composite is an unweighted average
of its benchmarks; the factors step's composite weights benchmarks equally too). Results are
averaged over splits with 95% t-intervals (splits share models, so the intervals are optimistic).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats
from scipy.linalg import solve as linalg_solve

from bayesirt.data.responses import informative_items, make_responses, validate_responses
from bayesirt.errors import ConfigError, DataError
from bayesirt.frequentist.mml import fit_mml
from bayesirt.models.information import item_bank
from bayesirt.safety.adaptive import (ESTIMATORS, SELECTION_RULES, ability_grid, quota_counts, run_cat, score_test,
                                      static_test)
from bayesirt.safety.cat_kernels import fixed_test_eap
from bayesirt.safety.settings import STATIC_DESIGN, STATIC_DESIGNS, TARGETS
from bayesirt.utils.parallel import parallel_map, spawn_seeds
from bayesirt.utils.validation import check_choice, check_int, parameter_error

__all__ = ["combine_benchmarks", "score_calibration", "cat_study", "summarize_study", "static_tests", "full_score",
           "DESIGNS", "METRICS", "TARGETS"]


def _resolve_target(ds: xr.Dataset, target: str) -> str:
    check_choice(target, TARGETS, name="target", caller="cat_study")
    if target != "auto":
        return target
    pooled = ds.attrs.get("item_group_is") == "benchmark" and np.unique(ds["item_group"].values).size > 1
    return "benchmark_mean" if pooled else "proportion"


def full_score(y: np.ndarray, groups, target: str) -> np.ndarray:
    """Each model's full score (column of ``y``, -1 missing): proportion correct over its observed
    items, or the unweighted mean over item groups (benchmarks) of the per-group proportion
    (over the groups the model has observed)."""
    y = np.asarray(y)
    if target == "proportion":
        with np.errstate(invalid="ignore", divide="ignore"):
            return (y == 1).sum(axis=0) / (y >= 0).sum(axis=0)
    groups = np.asarray(groups).astype(str)
    parts = []
    for g in np.unique(groups):
        block = y[groups == g]
        with np.errstate(invalid="ignore", divide="ignore"):
            parts.append((block == 1).sum(axis=0) / (block >= 0).sum(axis=0))
    return np.nanmean(np.vstack(parts), axis=0)

#: Short tests compared (coordinate ``design``; not ``method``, which ``.sel`` reserves).
DESIGNS = ("cat", "static", "random")
#: Metrics per split (coordinate-free variables of the study Dataset).
METRICS = ("rmse", "spearman", "theta_rmse")


def combine_benchmarks(datasets: Mapping[str, xr.Dataset]) -> xr.Dataset:
    """One response Dataset from several benchmarks: items concatenated, models outer-joined.

    Each benchmark's items get ``item_group`` = its key (and ids prefixed ``key/`` when ids
    repeat across benchmarks); a model missing from a benchmark has those cells missing.
    """
    if not datasets:
        raise DataError("no benchmarks given; pass a mapping name -> response Dataset")
    parts = {k: validate_responses(v) for k, v in datasets.items()}
    ids = [str(i) for ds in parts.values() for i in ds["item"].values]
    clash = len(set(ids)) < len(ids)
    models = list(dict.fromkeys(str(m) for ds in parts.values() for m in ds["model"].values))
    blocks, item_ids, groups = [], [], []
    for name, ds in parts.items():
        r = ds["responses"].where(ds["responses"] >= 0).reindex(model=models)
        blocks.append(r.transpose("item", "model").values)
        item_ids += [f"{name}/{i}" if clash else str(i) for i in ds["item"].values]
        groups += [str(name)] * ds.sizes["item"]
    return _mark_pooled(make_responses(np.vstack(blocks), item_id=item_ids, model_id=models, item_group=groups,
                                       name="+".join(map(str, parts))))


def _mark_pooled(ds: xr.Dataset) -> xr.Dataset:
    """Record that ``item_group`` names the pooled benchmarks (the composite target weighs them equally)."""
    ds.attrs["item_group_is"] = "benchmark"
    return ds


def _spline_basis(x: np.ndarray, knots: np.ndarray, degree: int) -> np.ndarray:
    """B-spline basis of ``x`` on ``knots`` (``degree`` knots beyond each end of the base interval),
    continued linearly beyond the base interval: scikit-learn's ``SplineTransformer(extrapolation="linear")``."""
    from scipy.interpolate import BSpline  # import time: scipy.interpolate is only needed here

    n_splines = knots.size - degree - 1
    spline = BSpline.construct_fast(knots, np.eye(n_splines), degree, extrapolate=False)
    lo, hi = knots[degree], knots[-degree - 1]
    out = np.zeros((x.size, n_splines))
    inside = (lo <= x) & (x <= hi)
    out[inside] = spline(x[inside])
    below, above = x < lo, x > hi
    if below.any() or above.any():
        f_lo, f_hi, g_lo, g_hi = spline(lo), spline(hi), spline(lo, nu=1), spline(hi, nu=1)
        for j in range(degree + 1 if degree <= 1 else degree):
            out[below, j] = f_lo[j] + (x[below] - lo) * g_lo[j]
            k = n_splines - 1 - j
            out[above, k] = f_hi[k] + (x[above] - hi) * g_hi[k]
    return out


def score_calibration(score, theta, target, *, n_knots: int = 5, degree: int = 3, alpha: float = 1e-3):
    """Spline regression of full score on reduced-test score and ability (fitted on calibration models).

    An additive cubic B-spline model ``target ~ f(score) + g(theta)``: scikit-learn's
    ``SplineTransformer`` (uniform knots over each input's range, linear extrapolation) then a lightly
    penalized ``Ridge``, written out with their arithmetic (the pipeline's fit took 9 ms, ~30 times
    this, and the CAT study fits several thousand per split).

    Returns
    -------
    callable
        ``predict(score, theta) -> ndarray``, clipped to [0, 1] (full scores are proportions).
    """
    x = np.column_stack([np.asarray(score, dtype=float), np.asarray(theta, dtype=float)])
    y = np.asarray(target, dtype=float)
    if x.shape[0] != y.shape[0] or x.shape[0] < 3 or not np.all(np.isfinite(x)) or not np.all(np.isfinite(y)):
        raise DataError(f"score calibration needs equally long finite score, theta and target with at least 3 "
                        f"models; got {x.shape[0]} and {y.shape[0]}")
    knots = []
    for lo, hi in zip(x.min(axis=0), x.max(axis=0)):
        base = np.linspace(lo, hi, n_knots)
        step_lo, step_hi = base[1] - base[0], base[-1] - base[-2]
        knots.append(np.r_[np.linspace(base[0] - degree * step_lo, base[0] - step_lo, degree), base,
                           np.linspace(base[-1] + step_hi, base[-1] + degree * step_hi, degree)])

    def features(columns):
        return np.hstack([_spline_basis(col, t, degree) for col, t in zip(columns.T, knots)])

    design = features(x)
    offset, y_offset = design.mean(axis=0), y.mean()
    design -= offset
    gram = design.T @ design
    gram.flat[:: gram.shape[0] + 1] += alpha
    try:
        coef = linalg_solve(gram, design.T @ (y - y_offset), assume_a="pos")
    except np.linalg.LinAlgError:  # a constant input (no range) makes the Gram matrix singular
        coef = np.linalg.lstsq(gram, design.T @ (y - y_offset), rcond=None)[0]
    intercept = y_offset - offset @ coef

    def predict(s, t):
        return np.clip(features(np.column_stack([np.asarray(s, float), np.asarray(t, float)])) @ coef + intercept, 0, 1)

    return predict


def _reduced_score(y: np.ndarray, items: np.ndarray, bank, theta: np.ndarray) -> np.ndarray:
    """Proportion correct on the administered items (rows ``items``; a 2-D array is per model).

    A model with none of them observed gets its expected proportion correct at ``theta``.
    """
    sub = y[items] if items.ndim == 1 else np.take_along_axis(y, items.T, axis=0)
    n_obs = (sub >= 0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = (sub == 1).sum(axis=0) / n_obs
    if np.any(n_obs == 0):
        p = np.exp(bank.log_pq(theta)[0])  # (items, models)
        expected = p[items].mean(axis=0) if items.ndim == 1 else np.take_along_axis(p, items.T, 0).mean(axis=0)
        score = np.where(n_obs == 0, expected, score)
    return score


def _metrics(predict, score, theta, full, theta_full, test) -> tuple[float, float, float]:
    pred = predict(score[test], theta[test])
    rmse = float(np.sqrt(np.mean((pred - full[test]) ** 2)))
    # Spearman's rho; predictions equal in exact arithmetic (items with equal parameters swapped, a set
    # given in another order) differ by rounding only: 10 decimals make them ties whatever the summation order
    rho = np.corrcoef(stats.rankdata(np.round(pred, 10)), stats.rankdata(full[test]))[0, 1] if np.ptp(pred) > 0 \
        else np.nan
    return rmse, float(rho), float(np.sqrt(np.mean((theta[test] - theta_full[test]) ** 2)))


def _one_split(task: dict) -> dict:
    """One calibration/test split: fit, build the tests, calibrate scores, evaluate (a parallel task)."""
    rng = np.random.default_rng(task["seed"])
    ds, budgets, n_random = task["data"], task["budgets"], task["random_subsets"]
    y = ds["responses"].values
    n_models = y.shape[1]
    perm = rng.permutation(n_models)
    n_cal = int(round(task["calibration"] * n_models))
    cal, test = np.sort(perm[:n_cal]), np.sort(perm[n_cal:])
    usable = (y[:, cal] >= 0).any(axis=1)  # items the calibration models answered
    fit = fit_mml(ds.isel(item=usable, model=cal), "2pl", priors=True, se=False)
    bank = item_bank(fit.items["discrimination"].values, fit.items["intercept"].values)
    a_d, y_u = bank[:2], y[usable]
    groups = ds["item_group"].values[usable]
    balance = task["quotas"] and np.unique(groups).size > 1
    full = full_score(y, ds["item_group"].values, task["target"])
    nodes, log_w = ability_grid()  # score_test's grid, for every fixed test of the split at once
    grid = (bank, nodes, log_w, *bank.log_pq(nodes))
    theta_full = fixed_test_eap(y_u, np.arange(bank.n_items)[None, :], *grid)[0][0]
    out = {m: np.full((len(budgets), 3), np.nan) for m in DESIGNS}
    out["random_all"] = np.full((len(budgets), n_random, 3), np.nan)
    ok = [k for k in budgets if k <= bank.n_items]
    if not ok:
        return out
    cat = run_cat(y_u, *a_d, budget=max(ok), rule=task["rule"], estimator=task["estimator"],
                  groups=groups if balance else None)

    def evaluate(items, theta):
        score = _reduced_score(y_u, items, bank, theta)
        predict = score_calibration(score[cal], theta[cal], full[cal])
        return _metrics(predict, score, theta, full, theta_full, test)

    for b, k in enumerate(budgets):
        if k not in ok:
            continue
        out["cat"][b] = evaluate(cat.items[:, :k], cat.theta[:, k])
        chosen = static_test(*a_d, theta_full[cal], k, groups=groups if balance else None, design=task["design"])
        out["static"][b] = evaluate(chosen, fixed_test_eap(y_u, chosen[None, :], *grid)[0][0])
        counts = quota_counts(groups, k) if balance else {}
        subsets = np.array([np.concatenate([rng.choice(np.flatnonzero(groups == g), n, replace=False)
                                            for g, n in counts.items() if n]) if balance
                            else rng.choice(bank.n_items, k, replace=False) for _ in range(n_random)])
        thetas = fixed_test_eap(y_u, subsets, *grid)[0]  # every subset of this budget in one compiled pass
        for r in range(n_random):
            out["random_all"][b, r] = evaluate(subsets[r], thetas[r])
        out["random"][b] = np.nanmean(out["random_all"][b], axis=0)
    return out


def static_tests(responses: xr.Dataset, budgets: Sequence[int], *, quotas: bool = False,
                 design: str = STATIC_DESIGN) -> pd.DataFrame:
    """The static test of each budget for the whole cohort, the items a short fixed test would
    administer: the regularized 2PL fitted to every model (items without variance removed), then
    :func:`static_test` over their abilities (with per-``item_group`` quotas when ``quotas``; as the
    study's static design, calibrated on all models instead of a split). One row per budget and item, in order
    of selection, with its parameters."""
    ds = informative_items(validate_responses(responses))[0]
    fit = fit_mml(ds, "2pl", priors=True, se=False)
    a, d = fit.items["discrimination"].values, fit.items["intercept"].values
    theta = score_test(ds["responses"].values, a, d).theta
    groups = ds["item_group"].values.astype(str)
    ids = ds["item_id"].values.astype(str)
    balance = quotas and np.unique(groups).size > 1
    rows = []
    for k in sorted({int(b) for b in budgets if b <= a.size}):
        for rank, i in enumerate(static_test(a, d, theta, k, groups=groups if balance else None, design=design),
                                 start=1):
            rows.append({"budget": k, "rank": rank, "item": ids[i], "item_group": groups[i],
                         "discrimination": a[i], "difficulty": -d[i] / a[i]})
    return pd.DataFrame(rows, columns=["budget", "rank", "item", "item_group", "discrimination", "difficulty"])


def _check_budgets(budgets, n_items: int) -> tuple[int, ...]:
    try:
        values = tuple(int(b) for b in budgets)
    except (TypeError, ValueError):
        raise parameter_error("budgets", "cat_study", "a list of distinct positive integers", budgets) from None
    if not values or any(b < 1 for b in values) or len(set(values)) < len(values):
        raise parameter_error("budgets", "cat_study", "a list of distinct positive integers", budgets)
    if min(values) > n_items:
        raise ConfigError(f"cat_study: every budget exceeds the {n_items} items; choose budgets below the bank size")
    return tuple(sorted(values))


def cat_study(responses: xr.Dataset, *, budgets: Sequence[int] = (10, 25, 50, 100), splits: int = 20,
              random_subsets: int = 100, calibration: float = 0.75, rule: str = "fisher", estimator: str = "eap",
              per_benchmark: bool = False, target: str = "auto", quotas: bool = False,
              static_design: str = STATIC_DESIGN, seed: int = 0, workers: int | None = None, scheduler: str | None = None, progress: bool = True) -> xr.Dataset:
    """Held-out recovery of full scores from short adaptive, static and random tests.

    Parameters
    ----------
    responses : xarray.Dataset
        A response Dataset; its ``item_group`` coordinate names the benchmarks.
    budgets : sequence of int, default (10, 25, 50, 100)
        Test lengths; those above a benchmark's size give NaN for it.
    splits : int, default 20
        Random calibration/test splits of the models (SAFE: 20).
    random_subsets : int, default 100
        Random item sets per budget and split (with the static test's quotas when ``quotas``).
    calibration : float, default 0.75
        Share of models in the calibration set.
    rule, estimator : str
        CAT item selection rule and ability update (:func:`bayesirt.safety.adaptive.run_cat`).
    per_benchmark : bool, default False
        False: one study of the whole bank. True: a separate 2PL and study per ``item_group``, on
        the models with responses to it.
    target : {"auto", "proportion", "benchmark_mean"}, default "auto"
        The full score (module docstring; :data:`TARGETS`).
    quotas : bool, default False
        Keep per-``item_group`` quotas (proportional) in the CAT, static and random tests. SAFE's
        CAT is unconstrained; its per-ability static tests and their random baselines keep
        per-benchmark quotas.
    static_design : {"stratified", "population", "max_information"}, default :data:`STATIC_DESIGN`
        The static test's design (:func:`bayesirt.safety.adaptive.static_test`); SAFE's is
        ``"max_information"``, which loses to random items on LLM cohorts.

    Items every model answers alike (or none answers) are removed first: they carry no information
    and make random subsets look better than they are (SAFE). Their ids are the attribute
    ``removed_items`` (JSON).
    seed : int
        Root seed; each split draws from its own child seed (:func:`spawn_seeds`), so results
        do not depend on ``workers``.
    workers, scheduler, progress
        Passed to :func:`bayesirt.utils.parallel.parallel_map` (one task per benchmark and split).

    Returns
    -------
    xarray.Dataset
        ``rmse``, ``spearman``, ``theta_rmse`` over ``(benchmark, split, design, budget)`` and
        ``random_rmse``, ``random_spearman``, ``random_theta_rmse`` over ``(benchmark, split,
        budget, subset)``.
    """
    ds, removed = informative_items(validate_responses(responses))
    check_int(splits, name="splits", caller="cat_study", low=2)
    check_int(random_subsets, name="random_subsets", caller="cat_study", low=1)
    if not 0 < calibration < 1 or min(round(calibration * ds.sizes["model"]), ds.sizes["model"]
                                       - round(calibration * ds.sizes["model"])) < 3:
        raise parameter_error("calibration", "cat_study", f"a share in (0, 1) leaving at least 3 of the "
                              f"{ds.sizes['model']} models on each side (12 models or more)", calibration)
    check_choice(rule, SELECTION_RULES, name="rule", caller="cat_study")
    check_choice(estimator, ESTIMATORS, name="estimator", caller="cat_study")
    check_choice(static_design, STATIC_DESIGNS, name="static_design", caller="cat_study")
    benches = {"all": ds}
    if per_benchmark:
        benches = {}
        for g in dict.fromkeys(ds["item_group"].values):
            part = ds.isel(item=ds["item_group"].values == g)
            benches[str(g)] = part.isel(model=(part["responses"] >= 0).any("item").values)  # models it has data on
    budgets = _check_budgets(budgets, max(b.sizes["item"] for b in benches.values()))
    target = _resolve_target(ds, target)
    seeds = spawn_seeds(seed, len(benches) * splits)
    tasks = [{"data": b, "seed": seeds[i * splits + s], "budgets": budgets, "random_subsets": int(random_subsets),
              "calibration": float(calibration), "rule": rule, "estimator": estimator, "target": target,
              "quotas": bool(quotas), "design": static_design}
             for i, b in enumerate(benches.values()) for s in range(splits)]
    results = parallel_map(_one_split, tasks, workers=workers, scheduler=scheduler, progress=progress,
                           description="CAT study splits")
    shape = (len(benches), splits)
    main = np.stack([np.stack([r[m] for m in DESIGNS]) for r in results]).reshape(*shape, len(DESIGNS),
                                                                                     len(budgets), 3)
    rand = np.stack([r["random_all"] for r in results]).reshape(*shape, len(budgets), int(random_subsets), 3)
    coords = {"benchmark": list(benches), "split": np.arange(splits), "design": list(DESIGNS),
              "budget": list(budgets), "subset": np.arange(int(random_subsets))}
    data = {m: (("benchmark", "split", "design", "budget"), main[..., i]) for i, m in enumerate(METRICS)}
    data |= {f"random_{m}": (("benchmark", "split", "budget", "subset"), rand[..., i]) for i, m in enumerate(METRICS)}
    out = xr.Dataset(data, coords=coords)
    out["rmse"].attrs["description"] = "RMSE of predicted vs actual full score (proportion correct), test models"
    out["spearman"].attrs["description"] = "Spearman correlation of predicted and actual full scores, test models"
    out["theta_rmse"].attrs["description"] = "RMSE of k-item vs all-item EAP ability (same calibration), test models"
    out.attrs.update(splits=int(splits), random_subsets=int(random_subsets), calibration=float(calibration),
                     rule=rule, estimator=estimator, seed=int(seed), per_benchmark=int(per_benchmark),
                     target=target, quotas=int(bool(quotas)), static_design=static_design,
                     n_items=int(ds.sizes["item"]), n_models=int(ds.sizes["model"]), model="2pl (MML, priors=True)",
                     removed_items=json.dumps(removed),
                     name=str(ds.attrs.get("name", "")))
    return out


def summarize_study(study: xr.Dataset, *, level: float = 0.95) -> pd.DataFrame:
    """Mean over splits and ``level`` t-interval per benchmark, design, budget and metric (``cat_curves.csv``)."""
    rows = []
    n = study.sizes["split"]
    tq = stats.t.ppf(0.5 + level / 2, n - 1)
    for metric in METRICS:
        da = study[metric]
        mean, sd = da.mean("split"), da.std("split", ddof=1)
        count = da.count("split")
        frame = xr.Dataset({"mean": mean, "lower": mean - tq * sd / np.sqrt(n), "upper": mean + tq * sd / np.sqrt(n),
                            "splits": count}).to_dataframe().reset_index()
        rows.append(frame.assign(metric=metric))
    cols = ["benchmark", "design", "budget", "metric", "mean", "lower", "upper", "splits"]
    return pd.concat(rows, ignore_index=True)[cols].sort_values(["benchmark", "metric", "design", "budget"],
                                                                 ignore_index=True)
