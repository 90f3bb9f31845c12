"""Issue 46's short cell (calls within 3 pp at 10-30% missing cells, ``audit_calibration``'s 3PL generator with
uneven 20-200-item groups): does another prior make the paired model's calls as right as they state?

Per benchmark seed (``audit_calibration.simulate("3pl", "mixed", ...)``, the seeds of
``paired_calibration_by_level.py``) and missing share, the pairs within 3 pp on the items both answered
(``audit_calibration.select``), and for each the posterior probability that a is ahead under:

* ``package``: :func:`~bayesirt.audit.bayes.paired.paired_accuracy` as the audit runs it (Dirichlet pseudo-count
  0.5 n_g / N per cell of group g, design weights);
* ``jeffreys per group``: 0.5 per cell in every group (more prior mass: the small groups' cells no longer all but
  certain);
* ``pooled centre, 5 items``: each group's Dirichlet centred on the pair's pooled cell shares (with 0.5 per cell)
  with the mass of 5 items (a hierarchical prior whose groups borrow the pair's overall discordance);
* ``oracle accuracy density``: the package's posterior (normal approximation from its mean and 90% interval)
  times the prior of the gap that the models' true accuracies imply at the pair's level,
  f(L + d / 2) f(L - d / 2), f a Gaussian kernel density (bandwidth 2 pp) of the other models' true accuracies:
  the population model of the leaderboard at its best (it knows every other model's truth).

The Dirichlet variants are drawn by Monte Carlo (:data:`DRAWS` draws; only pairs with a package probability
outside .12-.88 are drawn, since no variant calls a pair the package puts there). Reported per variant and
missing share: calls (P >= .95 or <= .05), the share right with its standard error over benchmarks as clusters
(``audit_calibration.cluster_se``), the mean stated probability of the called order, and the largest share of the
wrong calls that one benchmark holds.

Usage::

    .venv/bin/python benchmarks/paired_short_cell.py --seeds 60 --out benchmarks/results/paired_short_cell.json
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

MISSING = (0.1, 0.2, 0.3)
BAND = 0.03
DRAWS = 4000
VARIANTS = ("package", "jeffreys per group", "pooled centre, 5 items", "oracle accuracy density")
_GRID = np.linspace(-0.12, 0.12, 481)


def _dirichlet_prob(n10, n01, n, w, alpha, rng) -> np.ndarray:
    """P(sum_g w_g (pi10_g - pi01_g) > 0) under Dirichlet(n + alpha) per group; alpha (3, pair, group)."""
    shape = n10.shape + (DRAWS,)
    g10, g01, gc = (rng.standard_gamma(np.broadcast_to((c + a)[..., None], shape))
                    for c, a in zip((n10, n01, n - n10 - n01), alpha))
    gap = (w[None, :, None] * np.nan_to_num((g10 - g01) / (g10 + g01 + gc))).sum(axis=1)
    return (gap > 0).mean(axis=1)


def _oracle_prob(fit, level, a, b, accuracy, bandwidth=0.02) -> np.ndarray:
    mean = fit["gap_mean"].to_numpy()
    sd = (fit["gap_upper"] - fit["gap_lower"]).to_numpy() / (2 * norm.ppf(0.95))
    likelihood = norm.pdf((_GRID[None, :] - mean[:, None]) / sd[:, None])

    def density(x):  # (pair, grid): the other models' true accuracies
        k = np.exp(-0.5 * ((x[..., None] - accuracy) / bandwidth) ** 2)
        k[np.arange(x.shape[0]), :, a] = 0.0
        k[np.arange(x.shape[0]), :, b] = 0.0
        return k.sum(axis=-1) + 1e-300

    post = likelihood * density(level[:, None] + _GRID / 2) * density(level[:, None] - _GRID / 2)
    return (post * (_GRID > 0)).sum(axis=1) / post.sum(axis=1)


def benchmark(seed: int) -> list[dict]:
    from bayesirt.audit.bayes.paired import discordant_counts, paired_accuracy, paired_strata

    sim = ac.simulate("3pl", "mixed", 1000 * ac.SIZES.index("mixed") + seed)
    stratum, weights, _ = paired_strata(sim["group"])
    rng = np.random.default_rng(seed)
    rows = []
    for missing in MISSING:
        observed = np.random.default_rng(seed + 77).random(sim["y"].shape) >= missing
        y = np.where(observed, sim["y"], 0)
        gap, full = ac.both_gaps(y, observed)
        a, b = ac.select("both", y, observed, full, BAND)
        n10, n01, n = discordant_counts(y, observed, stratum, (a, b))
        fit = paired_accuracy(n10, n01, n, weights=weights, seed=seed)
        probs = {"package": fit["prob_a_ahead"].to_numpy()}
        near = np.abs(probs["package"] - 0.5) >= 0.38  # candidates for a call under any variant
        counts = (n10[near], n01[near], n[near])
        pooled = np.stack([counts[0].sum(1), counts[1].sum(1), (counts[2] - counts[0] - counts[1]).sum(1)]) + 0.5
        pooled = pooled / pooled.sum(axis=0)
        alphas = {"jeffreys per group": np.full((3,) + counts[0].shape, 0.5),
                  "pooled centre, 5 items": np.broadcast_to(5 * pooled[:, :, None], (3,) + counts[0].shape)}
        for name, alpha in alphas.items():
            probs[name] = np.full(a.size, 0.5)
            probs[name][near] = _dirichlet_prob(*counts, weights, alpha, rng)
        probs["oracle accuracy density"] = _oracle_prob(fit, (full[a] + full[b]) / 2, a, b, sim["truth"])
        truth = sim["truth"][a] - sim["truth"][b]
        for name, p in probs.items():
            call = (p >= ac.LEVEL) | (p <= 1 - ac.LEVEL)
            rows.append({"seed": seed, "missing": missing, "variant": name, "pairs": int(a.size),
                         "called": int(call.sum()), "right": int((call & ((truth > 0) == (p > 0.5))).sum()),
                         "stated": float(np.maximum(p, 1 - p)[call].sum())})
    print(f"seed {seed}", flush=True)
    return rows


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    for missing in MISSING:
        for name in VARIANTS:
            sel = [r for r in rows if r["missing"] == missing and r["variant"] == name]
            wrong = [r["called"] - r["right"] for r in sel]
            out.append({"missing": missing, "variant": name, "benchmarks": len(sel), **ac.pooled_calls(sel),
                        "largest_benchmark_share_of_wrong": max(wrong) / sum(wrong) if sum(wrong) else None})
    return out


def markdown(result: dict) -> str:
    lines = ["# Issue 46's short cell: calls within 3 pp under other priors", "",
             *run_header_lines(result),
             f"Generator `3pl`, groups `mixed`, {ac.MODELS} models x {ac.ITEMS:,} items, benchmark seeds "
             f"0-{result['seeds'] - 1}; pairs within 3 pp on the items both answered. Right: the share of calls "
             "(P(a ahead) >= .95 or <= .05) in the true order, (se) over benchmarks as clusters in percentage points; "
             "stated: the mean stated probability of the called order (what a calibrated posterior's share right "
             "matches); one benchmark's share: the largest share of the wrong calls in one benchmark.", "",
             "| missing | prior | calls | right (se) | stated | one benchmark's share of the wrong calls |",
             "|---:|---|---:|---|---|---|"]
    for s in result["summary"]:
        share = s["largest_benchmark_share_of_wrong"]
        lines.append(f"| {100 * s['missing']:.0f}% | {s['variant']} | {s['called']:,} | "
                     f"{ac._pct_se(s['accuracy'], s['accuracy_se'])} | {ac._pct(s['stated'])} | "
                     f"{'n/a' if share is None else f'{100 * share:.0f}%'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    return run_seeds(__file__, argv, __doc__.split("\n\n")[0], benchmark, summarize, markdown)


if __name__ == "__main__":
    sys.exit(main())
