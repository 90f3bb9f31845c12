"""Near-tie leaderboard with uncertainty (the Bayesian layer of the audit, issues 19 and 29).

Every eligible near-tie pair of both folds gets, model a being the one ahead on the pair's selection gap
(the full score with complete data, the items both answered with missing cells):

* ``prob_a_ahead``, ``gap_lower_pp``, ``gap_upper_pp``: is a ahead on the leaderboard's own score?
  The posterior probability that a's expected accuracy on the item population exceeds b's, and
  the 90% interval of that accuracy gap in percentage points, from the paired model of the two
  models' responses on the items both answered in the target half (a Dirichlet-multinomial of the
  discordant cells within each item group, the groups as fixed strata at the benchmark's sizes;
  :mod:`bayesirt.audit.bayes.paired`). It conditions on the pair's own responses only (no IRT model, no
  other model). ``n10`` / ``n01``: the discordant items (a right and b wrong, the reverse);
  ``mcnemar_p``: the exact two-sided McNemar p of those counts.
* ``prob_theta_a_ahead``: the former IRT comparison, kept for reference and never used for a
  category: the posterior probability that theta_a > theta_b under the ability spec (2PL by
  default) fitted to the full benchmark on every retained model (MAP-EM items and each ability
  drawn from N(EAP, posterior sd^2) given them; with ``bayes_method="nuts"`` the joint NUTS
  posterior). It conditions on the 2PL being true, and weights items by discrimination where the
  leaderboard counts them equally, so it can order a pair differently from accuracy.
* ``prob_reversal``: the posterior probability (over the residual-DIF draws) that the low-DIF
  recomposition strictly reverses the pair (``reversal_probability`` of
  :func:`bayesirt.audit.bayes.posterior.propagate_posterior`); ``random_reversal_rate``: the share of the
  draws' blueprint-matched random subtests of the same length that reverse it (the same draws'
  controls); ``excess_reversal`` = prob_reversal - random_reversal_rate, with ``excess_lower`` /
  ``excess_upper`` its 90% Monte Carlo interval (mean of e_s = 1{draw s reverses} - (draw s's
  random rate) over the S draws, +- 1.645 sd(e) / sqrt(S)): how precisely the finite draws and
  controls fix the difference, not a test (one recomposition flips pairs idiosyncratically, so
  the interval excludes 0, on either side, for many pairs whatever the DIF). The test is
  ``excess_p`` = min(1, random_reversal_rate / prob_reversal). Under the null of NT's
  randomization test (eq. 35), that the anchor set is exchangeable with a blueprint-matched random
  subset of the same cells, each draw's reversal indicator has expectation random_reversal_rate,
  so E[prob_reversal] = random_reversal_rate and Markov's inequality gives P(excess_p <= a) <= a.
  Like the audit-level test, rejecting it says the anchors differ from random subsets, which DIF
  or an anchor set tilted toward discriminating items (NT B.2) can cause.
  It is conservative. All of these condition on the spectral working model
  (:data:`bayesirt.audit.bayes.posterior.CONDITIONAL`).

A pair is listed when it is eligible in the deterministic audit (tied under neither the full nor
the low-DIF anchor score: the pairs counted in ``eligible_pairs``), so the table has exactly
``eligible_pairs`` rows. With missing cells the near ties are selected on the gap on the items both
models answered in the target half (``both_gap_pp``; :func:`bayesirt.audit.engine.ranking.both_answered_gaps`,
issue 46) and model a is the one ahead on that gap: the same items ``prob_a_ahead`` conditions on.
Before, pairs were chosen and oriented on each model's own full score, i.e. on items the posterior
ignores: called pairs were in the true order only .85-.90 of the time at 10-30% missing, and 20-23% of
the 1 pp near ties called at 10-30% missing were in the wrong order; now none of those is called,
and within 5 pp 96-98% of calls are right (``benchmarks/results/audit_calibration.md``). This
changes the audit's pair set with missing cells (a deterministic change: the primary,
within-family and threshold-curve pair sets all select on the both-answered gap); with complete data the two gaps are equal and nothing changes. Reversals are
still read on the models' scores (full against low-DIF anchor score).

``dif_p`` (:func:`bayesirt.audit.bayes.pair_dif.pair_dif_p`, issue 46): the per-pair
randomization p of the alignment between the items a wins over b and the two families' residual
DIF (posterior mean of the audit half, projected off the audit half's within-family ability
directions), against within-stratum permutations of that DIF; its floor is
1 / (:data:`bayesirt.audit.bayes.pair_dif.PERMUTATIONS` + 1) = 1/1001. ``dif_q``: its
Benjamini-Hochberg adjustment over the table's pairs; ``dif_sensitive``: dif_q <= .05, for every
pair, resolved or not. Under the null of no DIF in any pair, the chance that any pair of the table
is flagged is at most .05. ``excess_p`` (the rule before issue 46, which flagged nothing at strong
DIF) is kept as a reference column. Measured power and false-flag rate:
``benchmarks/results/audit_composition.md``. Categories (:func:`categorize`, thresholds :data:`RESOLVED`,
:data:`ROBUST`, :data:`SENSITIVE_P`):

1. "not resolved by the data": .05 < prob_a_ahead < .95 (resolved: called either way);
2. "resolved, composition-robust": resolved, and both the DIF-guided and the random
   recompositions rarely flip it (prob_reversal <= .05 and random_reversal_rate <= .05);
3. "resolved, DIF-sensitive": resolved, not robust, and dif_sensitive (dif_q <= .05: a's lead
   credibly sits on the items whose DIF favours a's family);
4. "resolved, composition-sensitive": resolved, and recompositions flip it without its order
   following the families' DIF.

A near tie that the data do not resolve is "not resolved" whatever its dif_sensitive: at 1 pp
ties on a few hundred items that is almost every pair, so read ``dif_sensitive`` beside the category.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.audit.bayes.pair_dif import PERMUTATIONS, dif_q, item_directions, pair_dif_p
from bayesirt.audit.bayes.paired import CALL_LEVEL, MIN_STRATUM, pair_posterior, paired_strata
from bayesirt.audit.engine.ranking import pair_reversals
from bayesirt.audit.engine.result import AuditResult
from bayesirt.data.responses import MISSING
from bayesirt.errors import DataError
from bayesirt.frequentist.mml import fit_mml
from bayesirt.models.specs import IRTSpec, MIRTSpec, load_spec
from bayesirt.utils.parallel import spawn_seeds

__all__ = ["add_near_ties", "check_ability_spec", "fit_abilities", "near_tie_table", "categorize", "near_ties_summary",
           "near_ties_dataset", "excess_interval", "excess_p", "CATEGORIES", "RESOLVED", "ROBUST", "SENSITIVE_P", "COLUMNS",
           "COLUMN_NOTES"]

#: prob_a_ahead (accuracy) from which the data resolve a pair's ordering (the paired model's call level, where its
#: borderline pairs get more draws).
RESOLVED = CALL_LEVEL
#: prob_reversal and random_reversal_rate up to which a resolved ordering counts as composition-robust.
ROBUST = 0.05
#: dif_q (Benjamini-Hochberg adjusted dif_p) up to which a pair is DIF-sensitive.
SENSITIVE_P = 0.05
#: z of the excess's 90% Monte Carlo interval.
_Z90 = 1.6448536269514722
CATEGORIES = ("resolved, composition-robust", "resolved, DIF-sensitive", "resolved, composition-sensitive",
              "not resolved by the data")
COLUMNS = ("fold", "model_a", "model_b", "family_a", "family_b", "owner_a", "owner_b", "full_gap_pp", "both_gap_pp",
           "prob_a_ahead", "prob_a_ahead_mcse", "gap_lower_pp", "gap_upper_pp", "n10", "n01", "mcnemar_p",
           "design_effect",
           "prob_theta_a_ahead", "prob_reversal", "random_reversal_rate", "excess_reversal", "excess_lower",
           "excess_upper", "excess_p", "dif_p", "dif_q", "dif_sensitive", "category")
#: What each probability column is of and what it conditions on (report.md, the netCDF attributes).
COLUMN_NOTES = {
    "prob_a_ahead": "posterior probability that a's expected accuracy on the item population (new items from the "
                    "same item groups, in the benchmark's proportions) exceeds b's, given only the two models' "
                    "responses on the items both answered in the target half (Dirichlet-multinomial of the "
                    f"discordant items within each item group, groups under {MIN_STRATUM} items pooled into one "
                    "stratum, strata weighted by their share of the benchmark, Jeffreys prior). Without testlet "
                    "labels it takes the items of a group as independent draws: items that share a stem or passage "
                    "(testlets) are fewer independent draws than items, and the interval then covers the accuracy on "
                    "these items more than on the item population (simulated testlets of 5 items: 88-89% of 90% "
                    "gap intervals cover the population gap). With them (a testlet item label) each pair's counts "
                    "are divided by its design_effect (the same testlets: 90%; "
                    "benchmarks/results/audit_calibration.md)",
    "prob_a_ahead_mcse": "Monte Carlo standard error of prob_a_ahead (0 with one stratum, where it is exact); pairs "
                         "within 2 MCSE of .95 or .05 at the default draws are drawn again with 10 times as many, and "
                         "a call still within about 2 MCSE can change with the seed",
    "both_gap_pp": "a's accuracy minus b's on the items both answered in the target half (the paired model's "
                   "items), percentage points: the gap the near ties are selected and oriented on (with complete "
                   "data equal to full_gap_pp; with missing cells full_gap_pp, each model's own items, can differ "
                   "and even have the other sign)",
    "gap_lower_pp": "5% posterior quantile of that accuracy gap A_a - A_b, percentage points (same model)",
    "gap_upper_pp": "95% posterior quantile of that accuracy gap, percentage points (same model)",
    "mcnemar_p": "exact two-sided McNemar p of the discordant items (n10 a right b wrong, n01 the reverse), items "
                 "both models answered; conditions on the discordant items, ignores item groups. With testlet "
                 "labels: the clustered McNemar p (Durkalski et al. 2003, chi-square over the testlets)",
    "design_effect": "variance of the pair's stratified accuracy gap with its items' testlets as clusters over the "
                     "variance with independent items (at least 1; 1 without testlet labels): the paired model "
                     "counts the pair's both-answered items as n / design_effect independent ones",
    "prob_theta_a_ahead": "posterior probability that a's 2PL ability exceeds b's given the MAP-EM item parameters "
                          "of the ability spec fitted to all retained models; conditions on the IRT model, never "
                          "decides a category",
    "prob_reversal": "posterior probability over the residual-DIF draws that the low-DIF recomposition strictly "
                     "reverses the pair; conditional on the spectral working model (offsets fixed at the audit's "
                     "estimate unless --bayes-method bootstrap)",
    "random_reversal_rate": "share of blueprint-matched random subtests of the same length (drawn per DIF draw from "
                            "that draw's cells) that strictly reverse the pair",
    "excess_reversal": "prob_reversal - random_reversal_rate; excess_lower / excess_upper: its 90% Monte Carlo "
                       "interval over the finite draws and controls (precision of the difference, not a test)",
    "excess_p": "min(1, random_reversal_rate / prob_reversal): a conservative p (Markov's inequality) of the null "
                "that the anchor set is exchangeable with blueprint-matched random subsets, for this pair; reference "
                "only (the rule before issue 46: it almost never reaches .05 at a near tie)",
    "dif_p": "per-pair randomization p that a's wins over b sit on the items whose residual DIF (posterior mean, "
             "audit half, projected off the audit half's within-family ability directions) favours a's family over "
             "b's: sum_i d_i (y_ia - y_ib) against within-stratum permutations of d; floor "
             f"1 / ({PERMUTATIONS} + 1); unadjusted it is not a per-pair test (<= .05 for 7% of near ties on "
             "simulated benchmarks without DIF): read dif_q",
    "dif_q": "Benjamini-Hochberg adjusted dif_p over the table's pairs",
    "dif_sensitive": "dif_q <= .05: DIF between the two families credibly adds to a's lead (any pair, resolved or "
                     "not; decides the DIF-sensitive category of resolved pairs). Under no DIF at all the chance that "
                     "any pair of the table is flagged is at most .05",
}
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


def excess_p(prob_reversal, random_reversal_rate) -> np.ndarray:
    """min(1, random_reversal_rate / prob_reversal) (module notes); 1 when prob_reversal is 0,
    NaN when the random rate is."""
    rev, rnd = np.asarray(prob_reversal, dtype=float), np.asarray(random_reversal_rate, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(rev > 0, np.minimum(1.0, rnd / rev), np.where(np.isnan(rnd), np.nan, 1.0))


def categorize(prob_a_ahead, prob_reversal, random_reversal_rate, dif_q, *, resolved: float = RESOLVED,
               robust: float = ROBUST, sensitive: float = SENSITIVE_P) -> np.ndarray:
    """The category of each pair (:data:`CATEGORIES`; the rule of the module notes). Resolved
    means called either way: prob_a_ahead >= ``resolved`` or <= 1 - ``resolved`` (b ahead on
    accuracy although a leads on the selection gap, possible only through missing responses or the
    strata weights). DIF-sensitive: ``dif_q`` <= ``sensitive``. A NaN random rate (no controls) is
    never robust; a NaN dif_q (no DIF draws) never DIF-sensitive."""
    ahead, rev = np.asarray(prob_a_ahead, dtype=float), np.asarray(prob_reversal, dtype=float)
    rnd = np.asarray(random_reversal_rate, dtype=float)
    robust_ = (rev <= robust) & (rnd <= robust)
    dif = np.asarray(dif_q, dtype=float) <= sensitive
    return np.where((ahead >= resolved) | (ahead <= 1 - resolved),
                    np.where(robust_, CATEGORIES[0], np.where(dif, CATEGORIES[1], CATEGORIES[2])), CATEGORIES[3])


def excess_interval(reversed_, control_rate) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and 90% Monte Carlo interval of e_s = reversed_s - control_rate_s over the draws s.

    Parameters
    ----------
    reversed_ : array_like of bool (draw, pair)
        Whether draw s's low-DIF recomposition strictly reverses the pair.
    control_rate : array_like (draw, pair)
        Share of draw s's matched-random controls that reverse it.

    Returns
    -------
    (excess, lower, upper) : ndarrays (pair,)
        ``excess`` = mean(e) = prob_reversal - random_reversal_rate; the bounds are
        excess -+ 1.645 sd(e) / sqrt(S) (sd with ddof 1; 0 width when S = 1).
    """
    e = np.asarray(reversed_, dtype=np.float64) - np.asarray(control_rate, dtype=np.float64)
    n = e.shape[0]
    mean = e.mean(axis=0)
    half = _Z90 * e.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else np.zeros_like(mean)
    return mean, mean - half, mean + half


def near_tie_table(folds, theta: xr.DataArray, *, y, observed, item_group, families, seed: int = 0,
                   directions=None, testlet=None) -> pd.DataFrame:
    """One row per deterministically eligible near-tie pair of each fold (columns :data:`COLUMNS`).

    Parameters
    ----------
    folds : sequence of FoldResult
        With ``posterior`` (the Bayesian layer).
    theta : xarray.DataArray
        Ability draws with a ``model`` dimension labelled by model id and any sample dimensions
        (``prob_theta_a_ahead``).
    y, observed : ndarray (item, model)
        The whole response matrix (1 right) and its observed mask; each fold's target models are
        its columns ``target_index``.
    item_group : array_like (item,)
        The item groups (the strata of :mod:`bayesirt.audit.bayes.paired`, small groups pooled).
    families : sequence of str
        The family labels of the posterior's ``family`` columns, in order (the audit's sorted
        retained families).
    seed : int, default 0
        Seed of the paired model's Monte Carlo draws (:func:`bayesirt.audit.bayes.paired.paired_accuracy`).
    directions : sequence of ndarray (item, k), optional
        Per fold, the audit half's ability directions that ``dif_p`` projects the DIF contrasts off
        (:func:`bayesirt.audit.bayes.pair_dif.item_directions`); None: raw contrasts.
    testlet : array_like (item,), optional
        Testlet labels: the paired model's counts are divided by each pair's design effect and
        ``mcnemar_p`` is the clustered test (:mod:`bayesirt.audit.bayes.paired`). None: items independent.

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
        # a leads on the gap the pair was selected on: the both-answered gap with missing cells (the paired
        # posterior's items; ranking module notes), the full-score gap (equal to it) with complete data
        gap = full[i] - full[j] if f.pair_gaps is None else f.pair_gaps[i, j]
        first = gap > 0
        columns = np.asarray(f.target_index)
        both = np.abs(gap)
        a, b = np.where(first, i, j)[eligible], np.where(first, j, i)[eligible]
        pos_a, pos_b = index.get_indexer(ids[a]), index.get_indexer(ids[b])
        if (pos_a < 0).any() or (pos_b < 0).any():
            raise DataError(f"fold {f.audit_fold}: some near-tie models have no ability draws; fit every retained model")
        paired = pair_posterior(y[:, columns], observed[:, columns], item_group, (a, b), testlet=testlet, seed=seed)
        reversed_ = post["reversed"].transpose("draw", "pair").values[:, eligible]
        if "control_reversal_rate" in post:
            rates = post["control_reversal_rate"].transpose("draw", "pair").values[:, eligible]
            excess, lower, upper = excess_interval(reversed_, rates)
            random_rate = rates.mean(axis=0, dtype=np.float64)
        else:
            excess = lower = upper = random_rate = np.full(a.size, np.nan)
        frames.append(pd.DataFrame({
            "fold": f.audit_fold, "model_a": ids[a], "model_b": ids[b],
            "family_a": t["family"].to_numpy(str)[a], "family_b": t["family"].to_numpy(str)[b],
            "owner_a": t["owner"].to_numpy(str)[a], "owner_b": t["owner"].to_numpy(str)[b],
            "full_gap_pp": 100 * (full[a] - full[b]), "both_gap_pp": 100 * both[eligible],
            "prob_a_ahead": paired["prob_a_ahead"].to_numpy(), "prob_a_ahead_mcse": paired["prob_a_ahead_mcse"].to_numpy(),
            "gap_lower_pp": 100 * paired["gap_lower"].to_numpy(), "gap_upper_pp": 100 * paired["gap_upper"].to_numpy(),
            "n10": paired["n10"].to_numpy(), "n01": paired["n01"].to_numpy(),
            "mcnemar_p": paired["mcnemar_p"].to_numpy(), "design_effect": paired["design_effect"].to_numpy(),
            "prob_theta_a_ahead": _ahead(draws, pos_a, pos_b),
            "prob_reversal": post["reversal_probability"].values[eligible].astype(float),
            "random_reversal_rate": random_rate, "excess_reversal": excess, "excess_lower": lower,
            "excess_upper": upper, "_full_a": full[a], "_full_b": full[b],
            "dif_p": _dif_p(f, y[:, columns], observed[:, columns], item_group, families, t["family"].to_numpy(str),
                            (a, b), seed, None if directions is None else directions[f.audit_fold], testlet)}))
        frames[-1]["excess_p"] = excess_p(frames[-1]["prob_reversal"], random_rate)
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*COLUMNS, "_full_a", "_full_b"])
    table["dif_q"] = dif_q(table["dif_p"])  # over the whole table: both folds' pairs are tested at once
    table["dif_sensitive"] = table["dif_q"].to_numpy(float) <= SENSITIVE_P
    table["category"] = categorize(table["prob_a_ahead"], table["prob_reversal"], table["random_reversal_rate"],
                                   table["dif_q"])
    table = table.sort_values(["fold", "_full_a", "_full_b"], ascending=[True, False, False], kind="stable")
    return table[list(COLUMNS)].reset_index(drop=True)


def _dif_p(fold, y, observed, item_group, families, target_family, pairs, seed, directions, testlet) -> np.ndarray:
    """:func:`bayesirt.audit.bayes.pair_dif.pair_dif_p` of the fold's pairs with the posterior mean
    DIF of its audit half (whole testlets permuted when there are labels); NaN without the draws."""
    a, b = pairs
    if fold.draws is None or "family_effect" not in fold.draws:
        return np.full(a.size, np.nan)
    delta = fold.draws["family_effect"].mean("draw").transpose("item", "family").values
    column = np.searchsorted(np.asarray(families, dtype=str), target_family)
    return pair_dif_p(y, observed, item_group, delta, column[a], column[b], (a, b), directions=directions,
                      testlet=testlet, seed=seed)


def near_ties_summary(table: pd.DataFrame) -> dict:
    """Counts of the categories (all of them, zeros included), the number of pairs,
    ``b_ahead_resolved`` (pairs with prob_a_ahead <= 1 - :data:`RESOLVED`: b credibly ahead on
    accuracy although a leads on the selection gap, possible only through missing responses or the strata weights),
    ``called`` (prob_a_ahead >= .95 or <= .05) and ``called_mcnemar_p_le_10`` (the share of them
    whose McNemar p is <= .10), ``calls_within_2_mcse`` (calls within 2 Monte Carlo SE of the
    threshold: the seed can change them) and ``prob_a_ahead_mcse_max``, ``dif_sensitive_any``
    (pairs with dif_sensitive, resolved or not; ``dif_p_le_05`` and ``excess_p_le_05`` the
    unadjusted counts), ``theta_resolved`` and ``theta_resolved_accuracy_not`` (pairs with
    prob_theta_a_ahead >= .95 or <= .05, and those among them that prob_a_ahead leaves unresolved)."""
    counts = table["category"].value_counts()
    ahead = table["prob_a_ahead"].to_numpy(float)
    called = (ahead >= RESOLVED) | (ahead <= 1 - RESOLVED)
    theta = table["prob_theta_a_ahead"].to_numpy(float)
    theta_called = (theta >= RESOLVED) | (theta <= 1 - RESOLVED)
    return {"pairs": int(len(table)), "counts": {c: int(counts.get(c, 0)) for c in CATEGORIES},
            "b_ahead_resolved": int((ahead <= 1 - RESOLVED).sum()),
            "called": int(called.sum()),
            "called_mcnemar_p_le_10": (float((table["mcnemar_p"].to_numpy(float)[called] <= 0.10).mean())
                                       if called.any() else None),
            "theta_resolved": int(theta_called.sum()),
            "theta_resolved_accuracy_not": int((theta_called & ~called).sum()),
            "thresholds": {"prob_a_ahead": RESOLVED, "prob_reversal": ROBUST, "random_reversal_rate": ROBUST,
                           "dif_q": SENSITIVE_P},
            "dif_sensitive_any": int(table["dif_sensitive"].to_numpy(bool).sum()),
            "excess_p_le_05": int((table["excess_p"].to_numpy(float) <= SENSITIVE_P).sum()),
            "dif_p_le_05": int((table["dif_p"].to_numpy(float) <= SENSITIVE_P).sum()),
            "prob_a_ahead_mcse_max": (float(np.nanmax(table["prob_a_ahead_mcse"])) if len(table) else None),
            "design_effect_max": (float(np.nanmax(table["design_effect"])) if len(table) else None),
            "calls_within_2_mcse": int((called & (np.abs(np.abs(ahead - 0.5) - (RESOLVED - 0.5))
                                                  <= 2 * table["prob_a_ahead_mcse"].to_numpy(float))).sum())}


def near_ties_dataset(table: pd.DataFrame, info: dict) -> xr.Dataset:
    """The table as a Dataset on a ``pair`` dimension (the ``near_ties`` group of audit.nc), the
    fit's settings in its attributes."""
    ds = xr.Dataset({c: ("pair", table[c].to_numpy() if pd.api.types.is_numeric_dtype(table[c])
                          else table[c].to_numpy(dtype=str)) for c in table.columns},
                    coords={"pair": np.arange(len(table))})
    ds.attrs = {k: int(v) if isinstance(v, bool) else v for k, v in info.items() if isinstance(v, (str, int, float))}
    ds.attrs |= {"resolved_threshold": RESOLVED, "robust_threshold": ROBUST, "sensitive_p": SENSITIVE_P,
                 "categories": "; ".join(CATEGORIES), "description": __doc__.split("\n\n")[1].replace("\n", " ")}
    for name, note in COLUMN_NOTES.items():
        if name in ds:
            ds[name].attrs["description"] = note
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
    y_all = responses["responses"].values
    observed = y_all != MISSING
    t = time.perf_counter()
    y = np.where(observed, y_all, 0)
    pop = result.population
    directions = [item_directions(y[:, audit], observed[:, audit], pop["family"].to_numpy()[audit])
                  for audit in (np.flatnonzero((pop["fold"] == h).to_numpy()) for h in (0, 1))]  # the folds' audit halves
    testlet = responses["testlet"].values.astype(str) if "testlet" in responses.coords else None
    result.near_ties = near_tie_table(result.folds, theta, y=y, observed=observed,
                                      directions=directions, testlet=testlet,
                                      item_group=responses["item_group"].values.astype(str),
                                      seed=spawn_seeds(config.seed, 7)[6],
                                      families=sorted(result.population.loc[result.population["status"] == "retained",
                                                                             "family"].unique()))
    paired_seconds = time.perf_counter() - t
    _, strata_weights, pooled = paired_strata(responses["item_group"].values.astype(str))
    if pooled:
        result.warnings.append(f"{pooled} item group(s) have fewer than {MIN_STRATUM} items, too few to stratify the "
                               "paired accuracy model: they are pooled into one stratum of near_ties.csv's "
                               "prob_a_ahead (their items treated as exchangeable)")
    info = {"ability_spec": str(tree.attrs.get("bayesirt_spec_name", config.bayes_ability_spec)), "method": method,
            "draws": int(theta.sizes["chain"] * theta.sizes["draw"]), "seed": int(seed),
            "models_fitted": int(retained.size), "fit_s": round(seconds, 3),
            "eligibility": "deterministic: tied under neither the full nor the low-DIF anchor score",
            "paired_model": "Dirichlet-multinomial of discordant items by item group (strata), Jeffreys prior"
                            + (", counts divided by each pair's testlet design effect" if testlet is not None else ""),
            "testlets": int(np.unique(testlet).size) if testlet is not None else 0,
            "item_groups": int(np.unique(responses["item_group"].values.astype(str)).size),
            "paired_strata": int(strata_weights.size), "pooled_item_groups": int(pooled),
            "min_stratum_items": MIN_STRATUM,
            "dif_p_floor": 1 / (PERMUTATIONS + 1), "dif_directions": int(min(d.shape[1] for d in directions)),
            "paired_s": round(paired_seconds, 3)}
    if tree.attrs.get("map_converged") == 0:
        result.warnings.append(f"the {info['ability_spec']} MAP-EM item fit of the near-tie table stopped at its "
                               "iteration cap; prob_theta_a_ahead may be off")
    if "advi_converged" in tree.attrs:
        info["advi_converged"] = bool(tree.attrs["advi_converged"])
        if not info["advi_converged"]:
            result.warnings.append(f"the {info['ability_spec']} ability fit of the near-tie table (ADVI) reached its "
                                   "iteration cap before the loss settled; prob_theta_a_ahead may be off")
    result.summary["bayes"]["near_ties"] = info | near_ties_summary(result.near_ties)
    result.timings["ability_fit_s"] = seconds
