"""Near-tie leaderboard with uncertainty (the Bayesian layer of the audit, issue 19 item 4).

Every eligible near-tie pair of both folds gets two posterior probabilities that answer different
questions:

* ``prob_a_ahead``: does the data resolve the ordering? The posterior probability that model a
  (the higher full score) has the higher ability under an IRT spec (2PL by default) fitted to the
  full benchmark on every retained model of the audit population (both halves), i.e. the share of
  posterior draws with theta_a > theta_b. With ``bayes_method="nuts"`` the draws are the joint
  NUTS posterior; otherwise (the default) the items are fitted by MAP-EM and each model's ability
  is drawn from its posterior given the items (normal with the EAP and posterior sd, independent
  across models): on a benchmark of 10^3 items the items' own uncertainty barely moves an ability
  posterior, and the fit takes seconds where a full-batch ADVI over 10^6-10^7 cells takes minutes.
* ``prob_reversal``: is the ordering composition-robust? The posterior probability that the
  low-DIF recomposition strictly reverses the pair (``reversal_probability`` of
  :func:`bayesirt.audit.bayes.propagate_posterior`).

A pair is listed when it is eligible in the deterministic audit (tied under neither the full nor
the low-DIF anchor score: the pairs counted in ``eligible_pairs``), so the table has exactly
``eligible_pairs`` rows. Categories, with thresholds :data:`RESOLVED` and :data:`ROBUST`:
"resolved, composition-robust" (prob_a_ahead >= .95 and prob_reversal <= .05), "resolved,
composition-sensitive" (prob_a_ahead >= .95 and prob_reversal > .05), "not resolved by the data"
(prob_a_ahead < .95).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.audit.ranking import pair_reversals
from bayesirt.audit.result import AuditResult
from bayesirt.data.responses import MISSING
from bayesirt.errors import DataError
from bayesirt.frequentist.mml import fit_mml
from bayesirt.models.specs import IRTSpec, MIRTSpec, load_spec
from bayesirt.utils.parallel import spawn_seeds

__all__ = ["add_near_ties", "check_ability_spec", "fit_abilities", "near_tie_table", "categorize", "near_ties_summary", "near_ties_dataset",
           "CATEGORIES", "RESOLVED", "ROBUST", "COLUMNS"]

#: prob_a_ahead from which the data resolve a pair's ordering.
RESOLVED = 0.95
#: prob_reversal up to which a resolved ordering counts as composition-robust.
ROBUST = 0.05
CATEGORIES = ("resolved, composition-robust", "resolved, composition-sensitive", "not resolved by the data")
COLUMNS = ("fold", "model_a", "model_b", "family_a", "family_b", "owner_a", "owner_b", "full_gap_pp", "prob_a_ahead",
           "prob_reversal", "category")
_CHUNK = 20_000_000  # draw x pair comparisons held at once
#: EM tolerance of the MAP-EM item fit (largest parameter change): P(a ahead of b) needs abilities to
#: about 1e-3, not the 1e-6 of a calibration.
ABILITY_TOLERANCE = 1e-4


def ability_method(bayes_method: str) -> str:
    """Inference of the ability fit for the audit's ``bayes_method``: NUTS for NUTS, else "map"
    (MAP-EM items, abilities from their posterior given the items; module notes)."""
    return "nuts" if bayes_method == "nuts" else "map"


def check_ability_spec(spec):
    """The loaded 1PL-4PL spec of ``spec`` (name, path or spec); a MIRT spec is refused (its
    abilities are vectors, so "a ahead of b" is undefined)."""
    loaded = spec if isinstance(spec, (IRTSpec, MIRTSpec)) else load_spec(spec)
    if loaded.kind == "mirt":
        raise DataError(f"The near-tie leaderboard needs a 1PL-4PL ability spec; {loaded.name!r} is MIRT, whose "
                        "abilities are vectors with no ordering. Pass e.g. bayes_ability_spec='2pl'.")
    return loaded


def fit_abilities(responses: xr.Dataset, models, *, spec="2pl", method: str = "map", draws: int = 400, seed: int = 0,
                  progress: bool = False) -> xr.DataTree:
    """Fit ``spec`` to the full benchmark on the models ``models`` (a boolean mask or positions
    along ``model``); items no chosen model answered are left out.

    ``method="map"``: MAP-EM items (:func:`bayesirt.frequentist.mml.fit_mml` with the spec's
    priors) and ``draws`` draws of every model's ability from N(EAP, posterior sd^2) (module
    notes), as a one-chain DataTree with ``posterior.theta``. Otherwise the DataTree of
    :func:`bayesirt.inference.fit` (``draws`` from the ADVI approximation, or per chain for NUTS)."""
    sub = responses.isel(model=np.asarray(models))
    answered = (sub["responses"].values != MISSING).any(axis=1)
    if not answered.all():
        sub = sub.isel(item=np.flatnonzero(answered))
    spec = check_ability_spec(spec)
    if method != "map":
        from bayesirt.inference import fit  # import time: PyMC only when the leaderboard fits by sampling

        return fit(sub, spec, method=method, draws=draws, seed=seed, progress=progress)

    result = fit_mml(sub, spec, priors=True, se=False, tol=ABILITY_TOLERANCE, ll_tol=ABILITY_TOLERANCE ** 2)
    eap, sd = result.abilities["eap"].values, result.abilities["eap_sd"].values
    theta = eap + sd * np.random.default_rng(seed).standard_normal((1, draws, eap.size))
    posterior = xr.Dataset({"theta": (("chain", "draw", "model"), theta)},
                           coords={"chain": [0], "draw": np.arange(draws), "model": sub["model"].values})
    tree = xr.DataTree.from_dict({"posterior": posterior})
    tree.attrs = {"bayesirt_spec_name": spec.name, "method": "map", "map_converged": int(result.converged),
                  "abilities": "N(EAP, posterior sd^2) given the MAP-EM items"}
    return tree


def _ahead(theta: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Share of draws (rows of ``theta``) with theta[:, a] > theta[:, b], per pair."""
    out = np.empty(a.size)
    step = max(1, _CHUNK // max(1, theta.shape[0]))
    for start in range(0, a.size, step):
        s = slice(start, start + step)
        out[s] = (theta[:, a[s]] > theta[:, b[s]]).mean(axis=0)
    return out


def categorize(prob_a_ahead, prob_reversal, *, resolved: float = RESOLVED, robust: float = ROBUST) -> np.ndarray:
    """The category of each pair (:data:`CATEGORIES`)."""
    ahead, rev = np.asarray(prob_a_ahead, dtype=float), np.asarray(prob_reversal, dtype=float)
    return np.where(ahead >= resolved, np.where(rev <= robust, CATEGORIES[0], CATEGORIES[1]), CATEGORIES[2])


def near_tie_table(folds, theta: xr.DataArray) -> pd.DataFrame:
    """One row per deterministically eligible near-tie pair of each fold (columns :data:`COLUMNS`).

    Parameters
    ----------
    folds : sequence of FoldResult
        With ``posterior`` (the Bayesian layer).
    theta : xarray.DataArray
        Ability draws with a ``model`` dimension labelled by model id and any sample dimensions.

    Rows are in leaderboard order within each fold: model a's full score, then model b's,
    descending.
    """
    samples = [d for d in theta.dims if d != "model"]
    draws = theta.stack(sample=samples).transpose("sample", "model").values if samples else theta.values[None, :]
    index = pd.Index(theta["model"].values.astype(str))
    frames = []
    for f in folds:
        if f.posterior is None:
            raise DataError("the fold has no posterior; near-tie probabilities need the Bayesian layer (bayes=True)")
        t = f.target
        full, ids = t["full"].to_numpy(float), t["model_id"].to_numpy(str)
        i, j = (np.asarray(p) for p in f.pairs)
        post = f.posterior
        if not (np.array_equal(post["model_i"].values.astype(str), ids[i])
                and np.array_equal(post["model_j"].values.astype(str), ids[j])):
            raise DataError(f"fold {f.audit_fold}: the posterior's pairs are not the fold's frozen pairs")
        eligible, _ = pair_reversals(full, t["anchor"].to_numpy(float), (i, j))
        first = full[i] > full[j]
        a, b = np.where(first, i, j)[eligible], np.where(first, j, i)[eligible]
        pos_a, pos_b = index.get_indexer(ids[a]), index.get_indexer(ids[b])
        if (pos_a < 0).any() or (pos_b < 0).any():
            raise DataError(f"fold {f.audit_fold}: some near-tie models have no ability draws; fit every retained model")
        frames.append(pd.DataFrame({
            "fold": f.audit_fold, "model_a": ids[a], "model_b": ids[b],
            "family_a": t["family"].to_numpy(str)[a], "family_b": t["family"].to_numpy(str)[b],
            "owner_a": t["owner"].to_numpy(str)[a], "owner_b": t["owner"].to_numpy(str)[b],
            "full_gap_pp": 100 * (full[a] - full[b]),
            "prob_a_ahead": _ahead(draws, pos_a, pos_b),
            "prob_reversal": post["reversal_probability"].values[eligible].astype(float),
            "_full_a": full[a], "_full_b": full[b]}))
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*COLUMNS, "_full_a", "_full_b"])
    table["category"] = categorize(table["prob_a_ahead"], table["prob_reversal"])
    table = table.sort_values(["fold", "_full_a", "_full_b"], ascending=[True, False, False], kind="stable")
    return table[list(COLUMNS)].reset_index(drop=True)


def near_ties_summary(table: pd.DataFrame) -> dict:
    """Counts of the categories (all of them, zeros included), the number of pairs and
    ``b_ahead_resolved``: the "not resolved" pairs with prob_a_ahead <= 1 - :data:`RESOLVED`, which
    the ability model orders the other way round from the full score."""
    counts = table["category"].value_counts()
    return {"pairs": int(len(table)), "counts": {c: int(counts.get(c, 0)) for c in CATEGORIES},
            "b_ahead_resolved": int((table["prob_a_ahead"] <= 1 - RESOLVED).sum()),
            "thresholds": {"prob_a_ahead": RESOLVED, "prob_reversal": ROBUST}}


def near_ties_dataset(table: pd.DataFrame, info: dict) -> xr.Dataset:
    """The table as a Dataset on a ``pair`` dimension (the ``near_ties`` group of audit.nc), the
    fit's settings in its attributes."""
    ds = xr.Dataset({c: ("pair", table[c].to_numpy() if pd.api.types.is_numeric_dtype(table[c])
                          else table[c].to_numpy(dtype=str)) for c in table.columns},
                    coords={"pair": np.arange(len(table))})
    ds.attrs = {k: int(v) if isinstance(v, bool) else v for k, v in info.items() if isinstance(v, (str, int, float))}
    ds.attrs |= {"resolved_threshold": RESOLVED, "robust_threshold": ROBUST, "categories": "; ".join(CATEGORIES),
                 "description": __doc__.split("\n\n")[1].replace("\n", " ")}
    return ds


def add_near_ties(result: AuditResult, responses: xr.Dataset, *, progress: bool = False) -> None:
    """Fit the ability spec (``config.bayes_ability_spec``) to every retained model and attach the
    near-tie table: ``result.near_ties`` (DataFrame), ``result.abilities`` (the fitted DataTree,
    in memory only), ``summary["bayes"]["near_ties"]`` and ``timings["ability_fit_s"]``."""
    config = result.config
    retained = np.flatnonzero((result.population["status"] == "retained").to_numpy())
    method = ability_method(config.bayes_method)
    seed = spawn_seeds(config.seed, 6)[5]  # the first five are the audit's streams
    t = time.perf_counter()
    tree = fit_abilities(responses, retained, spec=config.bayes_ability_spec, method=method,
                         draws=config.bayes_draws, seed=seed, progress=progress)
    seconds = time.perf_counter() - t
    theta = tree["posterior"]["theta"]
    ids = responses["model_id"].values.astype(str)[retained]
    theta = theta.assign_coords(model=ids)
    result.abilities = tree
    result.near_ties = near_tie_table(result.folds, theta)
    info = {"ability_spec": str(tree.attrs.get("bayesirt_spec_name", config.bayes_ability_spec)), "method": method,
            "draws": int(theta.sizes["chain"] * theta.sizes["draw"]), "seed": int(seed),
            "models_fitted": int(retained.size), "fit_s": round(seconds, 3),
            "eligibility": "deterministic: tied under neither the full nor the low-DIF anchor score"}
    if tree.attrs.get("map_converged") == 0:
        result.warnings.append(f"the {info['ability_spec']} MAP-EM item fit of the near-tie table stopped at its "
                               "iteration cap; prob_a_ahead may be off")
    if "advi_converged" in tree.attrs:
        info["advi_converged"] = bool(tree.attrs["advi_converged"])
        if not info["advi_converged"]:
            result.warnings.append(f"the {info['ability_spec']} ability fit of the near-tie table (ADVI) reached its "
                                   "iteration cap before the loss settled; prob_a_ahead may be off")
    result.summary["bayes"]["near_ties"] = info | near_ties_summary(result.near_ties)
    result.timings["ability_fit_s"] = seconds
