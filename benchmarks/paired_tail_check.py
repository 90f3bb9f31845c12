"""Issue 46's short cell through the paired posterior's standardized errors: is its width right, and where do the
wrong calls come from?

Per benchmark seed (``audit_calibration.simulate("3pl", "mixed", ...)``, the seeds of ``paired_short_cell.py``:
120 models x 1,000 items, uneven 20-200-item groups, a 3PL generator the paired model does not assume) and missing
share, :func:`~bayesirt.audit.bayes.paired.pair_posterior`'s model (``paired_accuracy`` with the design weights) on

* :data:`RANDOM_PAIRS` random pairs of distinct models: z = (posterior mean gap - true gap) / posterior sd, the sd
  read off the 90% interval (width / 3.29). A posterior of the right width gives sd(z) = 1 and normal tails;
* the pairs within 3 pp on the items both answered (``audit_calibration.select``, as the audit selects): z by the
  pair's discordance T (the share of both-answered items exactly one model got right, design-weighted), and, by
  |posterior mean / sd|, the share of pairs whose true gap has the other sign against the normal tail
  Phi(-|mean / sd|) a calibrated posterior implies;
* the calls (P(a ahead) >= .95 or <= .05) of the package and of a local empirical-Bayes variant: each called
  pair's gap given a zero-centred normal-mixture prior (sds :data:`EB_GRID`) whose weights are fitted by marginal
  likelihood to the gaps (normal approximation, n - 1 variance) of every pair whose level (mean of the two models'
  accuracies on their answered items) lies within :data:`EB_HALF` of the pair's: the leaderboard's own
  distribution of gaps at that level (adaptive shrinkage, Stephens 2017), which shrinks where near-identical models
  crowd.

Usage::

    .venv/bin/python benchmarks/paired_tail_check.py --seeds 60 --out benchmarks/results/paired_tail_check.json
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy.stats import norm

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import audit_calibration as ac  # noqa: E402
from _common import run_header_lines, run_seeds  # noqa: E402

MISSING = (0.0, 0.2, 0.3)
BAND = 0.03
RANDOM_PAIRS = 3000
#: The 90% interval's width in posterior sds of a normal posterior.
WIDTH_SDS = 2 * norm.ppf(0.95)
T_BINS = (0.0, 0.15, 0.2, 0.3, 1.0)
RATIO_BINS = (0.0, 1.0, 1.645, 2.0, 2.5, np.inf)
EB_GRID = np.array([0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2]) / 100
EB_HALF = 0.03
EB_ITERATIONS = 300


def _normal_gaps(n10, n01, n, weights) -> tuple[np.ndarray, np.ndarray]:
    """Stratified mean item difference and its sd (n - 1 variance) per pair."""
    nn = np.maximum(n, 1)
    d, t = (n10 - n01) / nn, (n10 + n01) / nn
    return (weights * d).sum(1), np.sqrt((weights ** 2 * (t - d ** 2) / np.maximum(n - 1, 1)).sum(1))


def eb_prob(mean, sd, neighbour_mean, neighbour_sd) -> float:
    """P(gap > 0) of one pair under the zero-centred normal mixture fitted (EM on the weights) to its neighbours."""
    lik = norm.pdf(neighbour_mean[:, None], 0, np.hypot(neighbour_sd[:, None], EB_GRID))
    pi = np.full(EB_GRID.size, 1 / EB_GRID.size)
    for _ in range(EB_ITERATIONS):
        r = lik * pi
        pi = (r / r.sum(1, keepdims=True)).mean(0)
    w = norm.pdf(mean, 0, np.hypot(sd, EB_GRID)) * pi
    v = 1 / (1 / sd ** 2 + 1 / EB_GRID ** 2)
    return float((w / w.sum() * norm.cdf(v * mean / sd ** 2 / np.sqrt(v))).sum())


def benchmark(seed: int) -> list[dict]:
    from bayesirt.audit.bayes.paired import discordant_counts, paired_accuracy, paired_strata

    sim = ac.simulate("3pl", "mixed", 1000 * ac.SIZES.index("mixed") + seed)
    stratum, weights, _ = paired_strata(sim["group"])
    n_models = sim["y"].shape[1]
    rng = np.random.default_rng(seed)
    ra, rb = rng.integers(0, n_models, (2, RANDOM_PAIRS))
    ra, rb = ra[ra != rb], rb[ra != rb]
    ia, ib = np.triu_indices(n_models, 1)
    rows = []
    for missing in MISSING:
        observed = np.random.default_rng(seed + 77).random(sim["y"].shape) >= missing
        y = np.where(observed, sim["y"], 0)

        def posterior(a, b):
            counts = discordant_counts(y, observed, stratum, (a, b))
            fit = paired_accuracy(*counts, weights=weights, seed=seed)
            mean, sd = fit["gap_mean"].to_numpy(), (fit["gap_upper"] - fit["gap_lower"]).to_numpy() / WIDTH_SDS
            return fit, counts, mean, sd, sim["truth"][a] - sim["truth"][b]

        _, _, mean, sd, truth = posterior(ra, rb)
        z_random = (mean - truth) / sd
        gap, full = ac.both_gaps(y, observed)
        a, b = ac.select("both", y, observed, full, BAND)
        fit, (n10, n01, n), mean, sd, truth = posterior(a, b)
        discordance = ((n10 + n01) / np.maximum(n, 1)) @ weights
        ratio = mean / sd
        p_package = fit["prob_a_ahead"].to_numpy()
        accuracy = (y * observed).sum(0) / np.maximum(observed.sum(0), 1)
        all_mean, all_sd = _normal_gaps(*discordant_counts(y, observed, stratum, (ia, ib)), weights)
        all_level, level = (accuracy[ia] + accuracy[ib]) / 2, (accuracy[a] + accuracy[b]) / 2
        p_eb = np.full(a.size, 0.5)
        for k in np.flatnonzero(np.abs(p_package - 0.5) > 0.4):  # no variant calls a pair the package puts inside .1-.9
            near = np.abs(all_level - level[k]) < EB_HALF
            p_eb[k] = eb_prob(mean[k], sd[k], all_mean[near], all_sd[near])
        row = {"seed": seed, "missing": missing,
               "random": {"pairs": int(z_random.size), "sum_z": float(z_random.sum()),
                          "sum_z2": float((z_random ** 2).sum()),
                          "beyond_1.645": int((np.abs(z_random) > 1.645).sum()),
                          "beyond_2": int((np.abs(z_random) > 2).sum())},
               "band_by_discordance": [], "band_by_ratio": [], "calls": {}}
        z = (mean - truth) / sd
        for lo, hi in zip(T_BINS[:-1], T_BINS[1:]):
            k = (discordance >= lo) & (discordance < hi)
            row["band_by_discordance"].append({"pairs": int(k.sum()), "sum_z2": float((z[k] ** 2).sum()),
                                               "beyond_2": int((np.abs(z[k]) > 2).sum())})
        for lo, hi in zip(RATIO_BINS[:-1], RATIO_BINS[1:]):
            k = (np.abs(ratio) >= lo) & (np.abs(ratio) < hi)
            row["band_by_ratio"].append({"pairs": int(k.sum()),
                                         "other_sign": int((np.sign(truth[k]) != np.sign(ratio[k])).sum()),
                                         "expected": float(norm.cdf(-np.abs(ratio[k])).sum())})
        for name, p in (("package", p_package), ("local empirical Bayes", p_eb)):
            call = (p >= ac.LEVEL) | (p <= 1 - ac.LEVEL)
            row["calls"][name] = {"called": int(call.sum()), "right": int((call & ((truth > 0) == (p > 0.5))).sum()),
                                  "stated": float(np.maximum(p, 1 - p)[call].sum())}
        rows.append(row)
    print(f"seed {seed}", flush=True)
    return rows


def _pooled(sel: list[dict], table: str, i: int, field: str) -> float:
    """The sum over benchmarks ``sel`` of ``field`` in bin ``i`` of ``table``."""
    return sum(r[table][i][field] for r in sel)


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    for missing in MISSING:
        sel = [r for r in rows if r["missing"] == missing]
        rnd = {k: sum(r["random"][k] for r in sel) for k in sel[0]["random"]}
        n = rnd["pairs"]
        s = {"missing": missing, "random_pairs": n, "random_sd_z": float(np.sqrt(rnd["sum_z2"] / n)),
             "random_mean_z": rnd["sum_z"] / n, "random_beyond_1.645": rnd["beyond_1.645"] / n,
             "random_beyond_2": rnd["beyond_2"] / n, "by_discordance": [], "by_ratio": []}
        for i, (lo, hi) in enumerate(zip(T_BINS[:-1], T_BINS[1:])):
            pairs = _pooled(sel, "band_by_discordance", i, "pairs")
            s["by_discordance"].append({
                "bin": [lo, hi], "pairs": pairs,
                "sd_z": float(np.sqrt(_pooled(sel, "band_by_discordance", i, "sum_z2") / pairs)) if pairs else None,
                "beyond_2": _pooled(sel, "band_by_discordance", i, "beyond_2") / pairs if pairs else None})
        for i, (lo, hi) in enumerate(zip(RATIO_BINS[:-1], RATIO_BINS[1:])):
            pairs = _pooled(sel, "band_by_ratio", i, "pairs")
            s["by_ratio"].append({
                "bin": [lo, hi], "pairs": pairs,
                "other_sign": _pooled(sel, "band_by_ratio", i, "other_sign") / pairs if pairs else None,
                "expected": _pooled(sel, "band_by_ratio", i, "expected") / pairs if pairs else None})
        s["calls"] = {name: ac.pooled_calls([r["calls"][name] for r in sel]) for name in sel[0]["calls"]}
        out.append(s)
    return out


def markdown(result: dict) -> str:
    lines = ["# Issue 46's short cell: the paired posterior's standardized errors", "", *run_header_lines(result),
             f"Generator `3pl`, groups `mixed`, {ac.MODELS} models x {ac.ITEMS:,} items, benchmark seeds "
             f"0-{result['seeds'] - 1}. z = (posterior mean gap - true gap) / posterior sd (sd = 90% interval width / "
             "3.29); a posterior of the right width has sd(z) = 1, 9.9% beyond 1.645 and 4.6% beyond 2.", "",
             "Random pairs:", "", "| missing | pairs | mean z | sd z | beyond 1.645 | beyond 2 |",
             "|---:|---:|---:|---:|---:|---:|"]
    for s in result["summary"]:
        lines.append(f"| {100 * s['missing']:.0f}% | {s['random_pairs']:,} | {s['random_mean_z']:.3f} | "
                     f"{s['random_sd_z']:.3f} | {ac._pct(s['random_beyond_1.645'])} | {ac._pct(s['random_beyond_2'])} |")
    lines += ["", "Pairs within 3 pp (both answered), by discordance T (the design-weighted share of both-answered "
              "items exactly one model got right):", "", "| missing | T | pairs | sd z | beyond 2 |",
              "|---:|---|---:|---:|---:|"]
    for s in result["summary"]:
        for b in s["by_discordance"]:
            sd = "n/a" if b["sd_z"] is None else f"{b['sd_z']:.3f}"
            lines.append(f"| {100 * s['missing']:.0f}% | {b['bin'][0]:g}-{b['bin'][1]:g} | {b['pairs']:,} | {sd} | "
                         f"{ac._pct(b['beyond_2'])} |")
    lines += ["", "Pairs within 3 pp, by |posterior mean / sd|: the share whose true gap has the other sign, against "
              "the normal tail a calibrated posterior implies:", "",
              "| missing | mean/sd | pairs | other sign | expected |",
              "|---:|---|---:|---:|---:|"]
    for s in result["summary"]:
        for b in s["by_ratio"]:
            lines.append(f"| {100 * s['missing']:.0f}% | {b['bin'][0]:g}-{b['bin'][1]:g} | {b['pairs']:,} | "
                         f"{ac._pct(b['other_sign'])} | {ac._pct(b['expected'])} |")
    lines += ["", "Calls within 3 pp (P >= .95 or <= .05): share right (se over benchmarks as clusters, pp) and the "
              "mean stated probability of the called order:", "",
              "| missing | posterior | calls | right (se) | stated |",
              "|---:|---|---:|---|---:|"]
    for s in result["summary"]:
        for name, c in s["calls"].items():
            lines.append(f"| {100 * s['missing']:.0f}% | {name} | {c['called']:,} | "
                         f"{ac._pct_se(c['accuracy'], c['accuracy_se'])} | {ac._pct(c['stated'])} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    return run_seeds(__file__, argv, __doc__.split("\n\n")[0], benchmark, summarize, markdown)


if __name__ == "__main__":
    sys.exit(main())
