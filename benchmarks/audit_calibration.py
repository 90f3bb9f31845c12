"""Calibration of the near-tie table off the easy case (issue 46 items 1, 2, 5, 6): small item
groups, missing cells, the per-pair composition p, and the Monte Carlo error of ``prob_a_ahead``.

Part 1, the paired model (:mod:`bayesirt.audit.bayes.paired` with the strata of
:func:`~bayesirt.audit.bayes.paired.paired_strata`, as the audit's near-tie table runs it). Each
benchmark has :data:`MODELS` models and :data:`ITEMS` items in groups of ``size`` items (1, 2, 4,
10; ``mixed``: uneven groups of 20-200), each group with its own difficulty shift, so items of a
group are correlated. Generators the paired model does not assume and the 2PL does not fit:

* ``3pl``: one ability, discriminations logN(0.3, 0.5), a group-specific guessing floor 0-0.35;
* ``2d``: two abilities (correlation 0.2); half of the groups load on each, with discriminating
  (logN(0.7, 0.3)) or flat (logN(-0.9, 0.3)) items;
* ``heterogeneous``: 2PL items, plus a model-by-group skill N(0, 0.5^2) (uneven profiles);
* ``testlets``: 2PL items in testlets of 5 consecutive items (within a group when the group has
  5 or more items), each model-by-testlet effect N(0, 0.6^2). The paired model is given the testlet
  labels (``pair_posterior``'s ``testlet``: counts divided by each pair's design effect); the same
  benchmarks without the labels (items taken as independent) are the rows ``testlets, no labels``,
  reported per generator and left out of the pooled tables.

Truth: A_m = sum_g (n_g / N) E_{new items of group g}[P(right)] over :data:`FRESH` fresh items per
group (fresh testlets for ``testlets``; common random numbers across models). Cells are missing
completely at random at 0-30%. Pairs: all model pairs within 1 pp (the audit's near ties) and
within 3 and 5 pp (where pairs get called), chosen by the audit's own
:func:`~bayesirt.audit.engine.ranking.near_tie_pairs` and oriented two ways: ``both``, the audit's
rule since issue 46 (the gap on the items both answered: the paired posterior's items), and
``full``, its rule before (each model's own-item score). With complete data both are the same pairs.
Reported: coverage of the 90% gap interval; the share of called pairs (P >= .95 or <= .05) in the
true order; the mean stated P(a ahead) and the observed share truly ahead among pairs stated at
.05-.35 (orientation leak); the mean Monte Carlo standard error and the share of calls that change
with the seed of the paired model's draws.

Part 2 (``--dif-benchmarks``), the DIF-sensitive rule of the audit's near-tie table
(``dif_sensitive``: the Benjamini-Hochberg adjusted per-pair ``dif_p``) on ``simulate_dif_benchmark``
designs: :mod:`audit_composition` (which also runs alone and writes
``benchmarks/results/audit_composition.md``).

Usage::

    nice -n 10 python benchmarks/audit_calibration.py [--benchmarks 3] [--dif-benchmarks 4] [--workers 2]
    nice -n 10 python benchmarks/audit_calibration.py --kinds testlets --benchmarks 18 --dif-benchmarks 0 --replace
    nice -n 10 python benchmarks/audit_calibration.py --sizes mixed --first-seed 18 --benchmarks 12 --dif-benchmarks 0 --append
    python benchmarks/audit_calibration.py --render   # the Markdown again from the stored rows
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine, versions, write_results  # noqa: E402

MODELS = 120
ITEMS = 1000
#: Fresh items per benchmark for the truth (at least 40 per group): its Monte Carlo error is far below the gaps'.
FRESH = 40_000
EPSILON = 0.01
WIDE = 0.03
LEVEL = 0.95
KINDS = ("3pl", "2d", "heterogeneous", "testlets")
SIZES = (1, 2, 4, 10, "mixed")
MISSING = (0.0, 0.1, 0.2, 0.3)
SELECTIONS = ("full", "both")
#: Bands of the reported rows: the audit's 1 pp, and wider ones where pairs get called.
BANDS = (EPSILON, WIDE, 0.05)
TESTLET = 5
#: The ``testlets`` benchmarks' rows with the paired model not given the labels.
UNLABELLED = "testlets, no labels"


def _sizes(size, n_items, rng) -> np.ndarray:
    if size == "mixed":
        raw = rng.uniform(20, 200, max(1, n_items // 110))
        out = np.maximum(1, np.round(raw / raw.sum() * n_items)).astype(int)
        out[-1] += n_items - out.sum()
        return out
    return np.full(n_items // size, size)


def _items(kind, group_par, sizes, rng) -> dict:
    g = np.repeat(np.arange(sizes.size), sizes)
    n = g.size
    b = group_par[g, 0] + rng.normal(0, 1.0, n)
    out = {"group": g, "b": b, "a": rng.lognormal(0.3, 0.5, n)}
    if kind == "2d":
        dim = g % 2
        out |= {"a": np.where(dim == 0, rng.lognormal(0.7, 0.3, n), rng.lognormal(-0.9, 0.3, n)), "dim": dim}
    if kind == "3pl":
        out["low"] = group_par[g, 1]
    if kind == "testlets":  # testlets of TESTLET consecutive items within a group
        start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        out["testlet"] = g * 10_000 + (np.arange(n) - start[g]) // TESTLET
    return out


def _prob(kind, items, theta, extra, rng=None) -> np.ndarray:
    """P(right) (item, model); ``extra``: the models' group skills (heterogeneous)."""
    g = items["group"]
    if kind == "2d":
        eta = items["a"][:, None] * theta[:, items["dim"]].T - items["b"][:, None]
    else:
        eta = items["a"][:, None] * (theta[None, :, 0] - items["b"][:, None])
    if kind == "heterogeneous":
        eta = eta + extra[g]
    if kind == "testlets":
        _, code = np.unique(items["testlet"], return_inverse=True)
        eta = eta + rng.normal(0, 0.6, (code.max() + 1, theta.shape[0]))[code]
    p = expit(eta)
    return items["low"][:, None] + (1 - items["low"][:, None]) * p if kind == "3pl" else p


def simulate(kind, size, seed) -> dict:
    rng = np.random.default_rng(seed)
    sizes = _sizes(size, ITEMS, rng)
    n_groups = sizes.size
    par = np.column_stack([rng.normal(0, 1, n_groups), rng.uniform(0, 0.35, n_groups)])
    theta = rng.multivariate_normal([0, 0], [[1, 0.2], [0.2, 1]], MODELS)
    extra = rng.normal(0, 0.5, (n_groups, MODELS))
    items = _items(kind, par, sizes, rng)
    y = (rng.random((items["group"].size, MODELS)) < _prob(kind, items, theta, extra, rng)).astype(np.int8)
    truth = np.zeros(MODELS)
    per = max(40, FRESH // n_groups)
    for start in range(0, n_groups, 50):  # groups in blocks: fresh items of every group, common to all models
        block = np.arange(start, min(start + 50, n_groups))
        fresh = _items(kind, par[block], np.full(block.size, per), rng)
        p = _prob(kind, fresh, theta, extra[block], rng)
        truth += (sizes[block][:, None] / sizes.sum() * p.reshape(block.size, per, MODELS).mean(axis=1)).sum(axis=0)
    return {"y": y, "group": items["group"], "truth": truth, "testlet": items.get("testlet")}


def both_gaps(y, observed) -> tuple[np.ndarray, np.ndarray]:
    """(model, model) accuracy gaps on the items both answered, and own-item full scores."""
    o = observed.astype(np.float64)
    right = (y == 1) & observed
    common = right.T.astype(np.float64) @ o  # [i, j]: items i got right among those both answered
    n = o.T @ o
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = (common - common.T) / n
    return gap, right.sum(axis=0) / observed.sum(axis=0)


def select(selection, y, observed, full, band) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (a, b), a ahead on the selection's own gap, 0 < |gap| <= band, chosen by the audit's
    :func:`~bayesirt.audit.engine.ranking.near_tie_pairs` (every model its own owner and family):
    ``both`` as the audit selects since issue 46 (the both-answered gaps with missing cells),
    ``full`` as it did before (each model's own-item score)."""
    from bayesirt.audit.engine.ranking import both_answered_gaps, near_tie_pairs

    labels = np.arange(full.size)
    gaps = both_answered_gaps(y, observed) if selection == "both" else None
    i, j = near_tie_pairs(full, labels, labels, epsilon=band, gaps=gaps)
    lead = full[i] - full[j] if gaps is None else gaps[i, j]
    return np.where(lead > 0, i, j), np.where(lead > 0, j, i)


def paired_rows(kind, size, seed) -> list[dict]:
    """The rows of one benchmark (both labellings for ``testlets``: module notes)."""
    from bayesirt.audit.bayes.paired import paired_strata

    sim = simulate(kind, size, seed)
    pooled = paired_strata(sim["group"])[2]
    variants = [(kind, sim["testlet"])] + ([(UNLABELLED, None)] if sim["testlet"] is not None else [])
    return [row for name, testlet in variants for row in _paired_rows(name, size, seed, sim, pooled, testlet)]


def _paired_rows(kind, size, seed, sim, pooled, testlet) -> list[dict]:
    from bayesirt.audit.bayes.paired import pair_posterior

    rows = []
    for missing in MISSING:
        observed = np.random.default_rng(seed + 77).random(sim["y"].shape) >= missing
        y = np.where(observed, sim["y"], 0)
        gap, full = both_gaps(y, observed)
        for selection in SELECTIONS if missing else ("both",):  # the same pairs with complete data
            a, b = select(selection, y, observed, full, max(BANDS))
            t = pair_posterior(y, observed, sim["group"], (a, b), testlet=testlet, seed=seed)
            t2 = (pair_posterior(y, observed, sim["group"], (a, b), testlet=testlet, seed=seed + 1)
                  if selection == "both" else t)  # seed flips
            truth = sim["truth"][a] - sim["truth"][b]
            own = gap[a, b] if selection != "full" else full[a] - full[b]
            for band, sel in ((f"{100 * e:g} pp", np.abs(own) <= e + 1e-9) for e in BANDS):
                p, p2, tr = t["prob_a_ahead"].to_numpy()[sel], t2["prob_a_ahead"].to_numpy()[sel], truth[sel]
                call = np.where(p >= LEVEL, 1, np.where(p <= 1 - LEVEL, -1, 0))
                call2 = np.where(p2 >= LEVEL, 1, np.where(p2 <= 1 - LEVEL, -1, 0))
                low = (p >= 0.05) & (p <= 0.35)
                rows.append({
                    "kind": kind, "size": str(size), "missing": missing, "selection": selection, "band": band,
                    "seed": seed, "pooled_groups": pooled, "pairs": int(sel.sum()), "called": int((call != 0).sum()),
                    "called_right": int(((call == 1) & (tr > 0)).sum() + ((call == -1) & (tr < 0)).sum()),
                    "covered": int(((t["gap_lower"].to_numpy()[sel] <= tr) & (tr <= t["gap_upper"].to_numpy()[sel])).sum()),
                    "low_pairs": int(low.sum()), "low_stated": float(p[low].sum()), "low_ahead": int((tr[low] > 0).sum()),
                    "mcse_sum": float(t["prob_a_ahead_mcse"].to_numpy()[sel].sum()),
                    "deff_sum": float(t["design_effect"].to_numpy()[sel].sum()),
                    "call_changed": int((call != call2).sum()), "called_either": int(((call != 0) | (call2 != 0)).sum()),
                    "called_stated": float(np.maximum(p, 1 - p)[call != 0].sum())})
    return rows


def summarize_paired(rows) -> list[dict]:
    keys = sorted({(r["band"], r["selection"], r["missing"], r["size"], r["kind"]) for r in rows},
                  key=lambda k: (k[0], SELECTIONS.index(k[1]), k[2], str(k[3]), k[4]))
    out = []
    for band, selection, missing, size, kind in keys:
        sel = [r for r in rows if (r["band"], r["selection"], r["missing"], r["size"], r["kind"])
               == (band, selection, missing, size, kind)]
        tot = {k: sum(r[k] for r in sel) for k in ("pairs", "called", "called_right", "covered", "low_pairs",
                                                    "low_stated", "low_ahead", "mcse_sum", "call_changed",
                                                    "called_either")}
        tot["deff_sum"] = sum(r.get("deff_sum", r["pairs"]) for r in sel)  # rows before testlet labels: 1
        stated = (sum(r["called_stated"] for r in sel) if all("called_stated" in r for r in sel) else None)  # rows since 2026-12-07
        div = lambda x, y: x / y if y else None  # noqa: E731
        out.append({"band": band, "selection": selection, "missing": missing, "size": size, "kind": kind,
                    "benchmarks": len(sel), "pooled_groups": sel[0]["pooled_groups"], **tot,
                    "coverage": div(tot["covered"], tot["pairs"]), "accuracy": div(tot["called_right"], tot["called"]),
                    "coverage_se": cluster_se([r["covered"] for r in sel], [r["pairs"] for r in sel]),
                    "accuracy_se": cluster_se([r["called_right"] for r in sel], [r["called"] for r in sel]),
                    "stated": div(stated, tot["called"]) if stated is not None else None,
                    "low_stated_mean": div(tot["low_stated"], tot["low_pairs"]),
                    "low_ahead_share": div(tot["low_ahead"], tot["low_pairs"]),
                    "mcse_mean": div(tot["mcse_sum"], tot["pairs"]), "deff_mean": div(tot["deff_sum"], tot["pairs"]),
                    "call_change_share": div(tot["call_changed"], tot["called_either"])})
    return out


def cluster_se(hits, totals) -> float | None:
    """Standard error of the pooled share sum(hits) / sum(totals) with the benchmarks as clusters (the ratio
    estimator's linearized variance, K / (K - 1) sum_k (h_k - r t_k)^2 / T^2): the pairs of one benchmark share its
    items and models, so their errors are correlated and a binomial SE over pairs would be too small. None
    with fewer than 2 benchmarks holding pairs."""
    h, t = np.asarray(hits, dtype=np.float64), np.asarray(totals, dtype=np.float64)
    k = int((t > 0).sum())
    if k < 2:
        return None
    r = h.sum() / t.sum()
    return float(np.sqrt(k / (k - 1) * ((h - r * t) ** 2).sum()) / t.sum())


def pooled_calls(records) -> dict:
    """Calls pooled over benchmarks, from per-benchmark dicts of ``called``, ``right`` and ``stated`` (the summed
    stated probability of the called order): ``called``, ``accuracy`` (share right), ``accuracy_se``
    (:func:`cluster_se`) and ``stated`` (the mean stated probability); None where nothing was called."""
    called = sum(r["called"] for r in records)
    return {"called": called, "accuracy": sum(r["right"] for r in records) / called if called else None,
            "accuracy_se": cluster_se([r["right"] for r in records], [r["called"] for r in records]),
            "stated": sum(r["stated"] for r in records) / called if called else None}


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _pct_se(x, se) -> str:
    """A share with its cluster SE in percentage points."""
    return _pct(x) if x is None or se is None else f"{100 * x:.1f}% ({100 * se:.1f})"


def _pooled_lines(rows) -> list[str]:
    """The rows pooled over the four generators and group sizes (the acceptance table: by band,
    selection and missing share), then the widest band's rows pooled over the generators by group size."""
    head = ["| band | selection | missing | pairs | coverage (se) | called | accuracy (se) | stated | "
            "stated / observed at .05-.35 | seed flips |", "|---|---|---|---|---|---|---|---|---|---|"]
    rows = [r for r in rows if r["kind"] in KINDS]  # the audit as run with the labels it is given
    lines = ["Pooled over the four generators and the five group sizes:", "", *head]
    for s in summarize_paired([r | {"kind": "all", "size": "all"} for r in rows]):
        lines.append(f"| {s['band']} | {s['selection']} | {100 * s['missing']:.0f}% | {s['pairs']:,} | "
                     f"{_pct_se(s['coverage'], s['coverage_se'])} | {s['called']:,} | "
                     f"{_pct_se(s['accuracy'], s['accuracy_se'])} | {_pct(s['stated'])} | {_pct(s['low_stated_mean'])} / "
                     f"{_pct(s['low_ahead_share'])} | {s['call_changed']} of {s['called_either']} |")
    wide = f"{100 * max(BANDS):g} pp"
    lines += ["", f"Pooled over the four generators ({wide} band):", "",
              "| selection | missing | group size | pairs | coverage (se) | called | accuracy (se) | stated | "
              "stated / observed at .05-.35 | seed flips |", "|---|---|---|---|---|---|---|---|---|---|"]
    for s in summarize_paired([r | {"kind": "all"} for r in rows if r["band"] == wide]):
        lines.append(f"| {s['selection']} | {100 * s['missing']:.0f}% | {s['size']} | {s['pairs']:,} | "
                     f"{_pct_se(s['coverage'], s['coverage_se'])} | {s['called']:,} | "
                     f"{_pct_se(s['accuracy'], s['accuracy_se'])} | {_pct(s['stated'])} | {_pct(s['low_stated_mean'])} / "
                     f"{_pct(s['low_ahead_share'])} | {s['call_changed']} of {s['called_either']} |")
    return [*lines, ""]


def markdown(result: dict) -> str:
    lines = ["# Calibration of the near-tie table off the easy case (issue 46)", "",
             f"{result['date']}; {result['machine']}; command "
             f"`{result['command']}`; {result['wall_s']:.0f} s wall.",
             f"Versions: {', '.join(f'{k} {v}' for k, v in result['versions'].items())}.", "",
             "## Paired model: gap coverage and called pairs", "",
             f"{MODELS} models x {ITEMS:,} items per benchmark; group size `mixed` = uneven groups of 20-200 items; "
             "groups under 20 items pooled into one stratum. Coverage: share of 90% gap intervals covering the true "
             "expected-accuracy gap (target >= 88%); accuracy: share of called pairs (P(a ahead) >= .95 or <= .05) in "
             "the true order (target >= 95%); (se): standard errors in percentage points with the benchmarks as "
             "clusters (a benchmark's pairs share its items and models, so their errors are correlated); stated: the "
             "mean stated probability of the called order over the calls, which a calibrated posterior's accuracy "
             "matches (n/a where rows from runs before it was recorded are pooled); stated/observed: mean P(a ahead) "
             "and share truly ahead among pairs "
             "stated at .05-.35; MCSE: mean Monte Carlo SE of P(a ahead); seed flips: calls that change between two "
             "seeds of the paired model's draws, among pairs called in either.", "",
             *_pooled_lines(result["rows"]),
             "Per generator:", "",
             "| band | selection | missing | group size | generator | benchmarks | pairs | coverage | called | "
             "accuracy (se) | stated / observed at .05-.35 | MCSE | seed flips | design effect |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in result["paired"]:
        lines.append(f"| {s['band']} | {s['selection']} | {100 * s['missing']:.0f}% | {s['size']} | {s['kind']} | "
                     f"{s['benchmarks']} | {s['pairs']:,} | {_pct(s['coverage'])} | {s['called']:,} | "
                     f"{_pct_se(s['accuracy'], s['accuracy_se'])} | {_pct(s['low_stated_mean'])} / {_pct(s['low_ahead_share'])} | "
                     f"{s['mcse_mean']:.4f} | {s['call_changed']} of {s['called_either']} | {s['deff_mean']:.2f} |"
                     if s["pairs"] else
                     f"| {s['band']} | {s['selection']} | {100 * s['missing']:.0f}% | {s['size']} | {s['kind']} | "
                     f"{s['benchmarks']} | 0 | | | | | | | |")
    dif = result.get("composition")
    if dif:
        from audit_composition import markdown_lines  # noqa: E402 (part 2, its own module)

        lines += ["", "## DIF-sensitive rule (dif_sensitive: Benjamini-Hochberg adjusted dif_p <= .05)", "",
                  *markdown_lines(dif)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmarks", type=int, default=3)
    parser.add_argument("--dif-benchmarks", type=int, default=4)
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--skip-paired", action="store_true")
    parser.add_argument("--first-seed", type=int, default=0, help="seed offset of the benchmarks of this run")
    parser.add_argument("--append", action="store_true", help="add this run's part-1 rows to those of the last run")
    parser.add_argument("--replace", action="store_true",
                        help="as --append, but first drop the last run's rows of the kinds run here")
    parser.add_argument("--workers", type=int, default=1, help="benchmarks simulated and fitted at once (processes)")
    parser.add_argument("--sizes", nargs="+", default=[str(s) for s in SIZES], choices=[str(s) for s in SIZES],
                        help="group sizes of this run's benchmarks")
    parser.add_argument("--render", action="store_true",
                        help="rewrite the results (summaries and Markdown) from the stored rows; run nothing")
    args = parser.parse_args()
    results = Path(__file__).parent / "results" / "audit_calibration.json"
    if args.render:
        import json

        stored = json.loads(results.read_text())
        write_results(results, stored | {"paired": summarize_paired(stored["rows"])}, markdown, echo=True)
        return
    sizes = [next(s for s in SIZES if str(s) == name) for name in args.sizes]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    t0 = time.perf_counter()
    rows, previous = [], None
    dropped = ({*args.kinds, *((UNLABELLED,) if "testlets" in args.kinds else ())} if args.replace else set())
    if args.skip_paired or args.append or args.replace:  # keep part 1 of the last run (and add to it)
        import json

        previous = json.loads(results.read_text())
        rows = [r for r in previous["rows"] if r["kind"] not in dropped]
    if not args.skip_paired:
        from concurrent.futures import ProcessPoolExecutor

        tasks = [(kind, size, seed) for kind in args.kinds for size in sizes
                 for seed in range(args.first_seed, args.first_seed + args.benchmarks)]
        runs = [(kind, size, 1000 * SIZES.index(size) + seed + 100 * KINDS.index(kind)) for kind, size, seed in tasks]
        with ProcessPoolExecutor(max(1, args.workers)) as pool:
            for (kind, size, seed), new in zip(tasks, pool.map(paired_rows, *zip(*runs))):
                rows += new
                print(f"{kind} size {size} seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
    composition = None
    if args.dif_benchmarks:
        from audit_composition import composition_study  # noqa: E402 (part 2, its own module)

        composition = composition_study(args.dif_benchmarks)
    again = args.append or args.replace
    result = {"date": time.strftime("%Y-%m-%d"), "machine": machine(),
              "wall_s": time.perf_counter() - t0 + (previous["wall_s"] if again else 0),
              "command": (f"{previous['command']}; then " if again else "")
                         + "nice -n 10 python benchmarks/audit_calibration.py --benchmarks "
                         f"{args.benchmarks} --dif-benchmarks {args.dif_benchmarks} --kinds {' '.join(args.kinds)}"
                         + (f" --first-seed {args.first_seed}" if args.first_seed else "")
                         + (f" --sizes {' '.join(args.sizes)}" if sizes != list(SIZES) else "")
                         + (" --append" if args.append else "") + (" --replace" if args.replace else "")
                         + (f" --workers {args.workers}" if args.workers > 1 else "")
                         + (" --skip-paired" if args.skip_paired else ""),
              "versions": versions(("bayesirt", "numpy", "scipy")), "paired": summarize_paired(rows),
              "composition": composition, "rows": rows}
    write_results(results, result, markdown, echo=True)


if __name__ == "__main__":
    main()
