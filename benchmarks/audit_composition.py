"""The near-tie table's DIF-sensitive rule (``dif_sensitive``: ``dif_q`` <= .05, the
Benjamini-Hochberg adjusted per-pair ``dif_p``) against the old ``excess_p`` on
``simulate_dif_benchmark`` designs with the audit's Bayesian layer (issue 46 item 5); also part 2
of ``benchmarks/audit_calibration.py``.

Definitions. False-flag rate: the share of a design's near-tie pairs (every eligible pair of both
folds) flagged DIF-sensitive when no pair is ordered by DIF (``null``, ``target-null``); "tables
with a flag": audits with at least one flagged pair. Recall: among the pairs whose order is DIF's
(their order in expected accuracy with the planted DIF differs from the order without it), the
share flagged; "category recall": the share of them in the "resolved, DIF-sensitive" category
(which also needs the data to resolve the order).

* ``null``: no DIF at all (dif_sd 0): every flag is false.
* ``moderate`` (dif_sd 0.4) and ``medium`` (0.8): zero-sum DIF on half of the items in every model,
  DIF of known, smaller sizes than ``strong``.
* ``target-null`` (target-side, as ``benchmarks/audit_null_power.py``): zero-sum DIF sd 0.8 on half of the
  items in the models of outer fold 0 only. Fold 0's anchors are chosen on a half with real DIF and
  scored on a half without any, fold 1's are chosen on a half without DIF: no target half's near
  ties are ordered by DIF, so every flag (dif_p <= .05) is a false flag.
* ``strong``: zero-sum DIF sd 1.2 on half of the items in every model. A pair is DIF-ordered when
  its order in expected accuracy on the benchmark's items with the planted DIF differs from its
  order without it (the truth's abilities and items); recall is the share of those flagged.

Audits: :data:`N_OWNERS` owners x NT's five families, :data:`N_ITEMS` items in four groups,
``AuditConfig(quick=True, controls=99, composition_bootstrap=0, owner_bootstrap=0, bayes=True,
bayes_draws=DRAWS)`` with the default 100 controls per draw (floor of the p: 1/101).

Testlets (option --testlets K): the same designs with the items of each group in testlets of K
consecutive group members and a model-by-testlet effect N(0, 0.6^2) on the logit (TESTLET_SD; a
generator the DIF model does not fit: clumped, persistent, but not by family). It is part of both
truths, with and without the planted DIF, so it orders no pair by DIF; under null every flag is
still false. Each design runs twice on the same data: with the labels in the responses' testlet
coordinate (dif_p permutes whole testlets) and without ("no labels": items permuted one by one).
Results go to results/audit_composition_testlets.*.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.special import expit

from bayesirt.audit.bayes.pair_dif import PERMUTATIONS

N_OWNERS, N_ITEMS, DRAWS = 60, 600, 100
DESIGNS = {"null": 0.0, "target-null": 0.8, "moderate": 0.4, "medium": 0.8, "strong": 1.2}
#: Designs whose DIF is in every model (recall is measured there).
DIF_DESIGNS = ("moderate", "medium", "strong")
#: SD of the model-by-testlet logit effects of ``--testlets``.
TESTLET_SD = 0.6


def group_testlets(item_group, size: int) -> np.ndarray:
    """Testlet labels: each group's items, in item order, in runs of ``size`` (the last run may be shorter)."""
    group = np.asarray(item_group).astype(str)
    rank = np.zeros(group.size, dtype=np.int64)
    for g in np.unique(group):
        members = np.flatnonzero(group == g)
        rank[members] = np.arange(members.size) // size
    return np.char.add(np.char.add(group, "-t"), rank.astype(str))


def _eta(truth) -> np.ndarray:
    return truth["easiness"][:, None] + truth["loading"] @ truth["theta"].T


def one(design: str, seed: int, testlet: int = 0, labelled: bool = True) -> dict:
    from bayesirt.audit import AuditConfig, run_audit
    from bayesirt.data import simulate_dif_benchmark
    from bayesirt.data.families import FAMILIES
    from bayesirt.data.populations import audit_population

    t0 = time.perf_counter()
    ds, truth = simulate_dif_benchmark(n_owners=N_OWNERS, families=FAMILIES, n_items=N_ITEMS, dif_fraction=0.5,
                                       dif_sd=DESIGNS[design], seed=seed)
    family = np.arange(ds.sizes["model"]) % len(FAMILIES)  # models by owner, then family: the truth's columns
    dif = np.ones(ds.sizes["model"], dtype=bool)
    eta = _eta(truth)
    if testlet:
        labels = group_testlets(ds["item_group"].values, testlet)
        codes = np.unique(labels, return_inverse=True)[1]
        eta = eta + np.random.default_rng(seed + 20_000).normal(0, TESTLET_SD, (codes.max() + 1, eta.shape[1]))[codes]
        if labelled:
            ds = ds.assign_coords(testlet=("item", labels))
    uniform = np.random.default_rng(seed + 10_000).random(eta.shape)
    delta = truth["family_effect"][:, family]
    y = (uniform < expit(eta + delta)).astype(np.int8)
    ds = ds.assign(responses=ds["responses"].copy(data=y))
    moved = 0
    if design == "target-null":  # DIF only in fold 0's models; the split is recomputed until it is stable (<= 10 times)
        for _ in range(10):
            dif = audit_population(ds)["fold"].to_numpy() == 0
            y = (uniform < expit(eta + np.where(dif[None, :], delta, 0.0))).astype(np.int8)
            ds = ds.assign(responses=ds["responses"].copy(data=y))
            moved = int(((audit_population(ds)["fold"].to_numpy() == 0) != dif).sum())
            if not moved:
                break
    result = run_audit(ds, AuditConfig(quick=True, controls=99, composition_bootstrap=0, owner_bootstrap=0, bayes=True,
                                       bayes_draws=DRAWS), progress=False)
    table = result.near_ties
    with_dif = expit(eta + np.where(dif[None, :], delta, 0.0)).mean(axis=0)
    without = expit(eta).mean(axis=0)
    col = {m: k for k, m in enumerate(ds["model_id"].values.astype(str))}
    a = np.array([col[m] for m in table["model_a"]], dtype=int)
    b = np.array([col[m] for m in table["model_b"]], dtype=int)
    ordered = (np.sign(with_dif[a] - with_dif[b]) != np.sign(without[a] - without[b])) if design in DIF_DESIGNS \
        else np.zeros(a.size, dtype=bool)
    flagged = table["dif_sensitive"].to_numpy(bool)
    category = (table["category"] == "resolved, DIF-sensitive").to_numpy()
    name = design if not testlet else f"{design}, testlets of {testlet}" + ("" if labelled else ", no labels")
    return {"design": name, "seed": seed, "pairs": int(len(table)), "flagged": int(flagged.sum()),
            "dif_pairs": int(ordered.sum()), "dif_flagged": int((flagged & ordered).sum()),
            "other_flagged": int((flagged & ~ordered).sum()),
            "old_flagged": int((table["excess_p"].to_numpy(float) <= 0.05).sum()),
            "raw_flagged": int((table["dif_p"].to_numpy(float) <= 0.05).sum()),
            "dif_category": int((category & ordered).sum()), "resolved": int(table["category"].ne("not resolved by the data").sum()),
            "resolved_dif_sensitive": int((table["category"] == "resolved, DIF-sensitive").sum()),
            "audit_p": float(result.controls["p_value"].sel(pair_set="primary")), "models_moved": moved,
            "p_floor": float(table["dif_p"].min()) if len(table) else None,
            "seconds": time.perf_counter() - t0}


def composition_study(benchmarks: int, designs=tuple(DESIGNS), testlet: int = 0) -> dict:
    rows = []
    for design in designs:
        for seed in range(benchmarks):
            for labelled in (True, False) if testlet else (True,):
                rows.append(one(design, 500 + seed, testlet, labelled))
                r = rows[-1]
                print(f"composition {r['design']} seed {seed}: {r['pairs']} pairs, {r['flagged']} flagged, "
                      f"{r['dif_pairs']} DIF-ordered ({r['dif_flagged']} flagged), old {r['old_flagged']}, "
                      f"{r['seconds']:.0f} s", flush=True)
    summary = []
    for name in dict.fromkeys(r["design"] for r in rows):
        sel = [r for r in rows if r["design"] == name]
        design = name.split(",")[0]
        tot = {k: sum(r[k] for r in sel) for k in ("pairs", "flagged", "dif_pairs", "dif_flagged", "other_flagged",
                                                    "old_flagged", "raw_flagged", "resolved_dif_sensitive",
                                                    "dif_category", "resolved")}
        summary.append({"design": name, "dif_sd": DESIGNS[design], "benchmarks": len(sel), **tot,
                        "tables_flagged": sum(r["flagged"] > 0 for r in sel),
                        "flag_rate": tot["flagged"] / tot["pairs"] if tot["pairs"] else None,
                        "raw_rate": tot["raw_flagged"] / tot["pairs"] if tot["pairs"] else None,
                        "recall": tot["dif_flagged"] / tot["dif_pairs"] if tot["dif_pairs"] else None,
                        "category_recall": tot["dif_category"] / tot["dif_pairs"] if tot["dif_pairs"] else None,
                        "other_flag_rate": (tot["other_flagged"] / (tot["pairs"] - tot["dif_pairs"])
                                            if tot["pairs"] > tot["dif_pairs"] else None),
                        "p_floor": 1 / (PERMUTATIONS + 1), "audit_p": [r["audit_p"] for r in sel]})
    note = (f"{N_OWNERS} owners x 5 families, {N_ITEMS} items, {DRAWS} DIF draws per audit half; seeds 500, 501, ... "
            "Null: no DIF. Target-null: DIF sd 0.8 on half of the items in fold 0's models only; the split is "
            "recomputed after removing the DIF, and when models still change fold (models_moved in the JSON) some "
            "target models carry DIF shared with the audit half, so flags are not all false. Moderate / medium / "
            "strong: DIF sd 0.4 / 0.8 / 1.2 in every model; DIF-ordered = the pair's order in expected accuracy with "
            "the planted DIF differs from its order without it. Flagged: dif_sensitive (dif_q <= .05); raw: "
            "unadjusted dif_p <= .05; old: excess_p <= .05, the rule before issue 46."
            + (f" Testlets of {testlet} items within the groups." if testlet else ""))
    return {"summary": summary, "rows": rows, "note": note}


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def markdown_lines(study: dict) -> list[str]:
    """The results table of :func:`composition_study` (also part 2 of audit_calibration.md)."""
    lines = ["| design | DIF sd | audits | pairs | flagged (false-flag rate without DIF) | audits with a flag | "
             "DIF-ordered pairs | recall | category recall | resolved pairs | flagged among the others | "
             "raw dif_p <= .05 | old excess_p <= .05 | smallest dif_p |", "|---" * 14 + "|"]
    for s in study["summary"]:
        lines.append(f"| {s['design']} | {s['dif_sd']:g} | {s['benchmarks']} | {s['pairs']:,} | {s['flagged']:,} "
                     f"({_pct(s['flag_rate'])}) | {s['tables_flagged']} of {s['benchmarks']} | {s['dif_pairs']:,} | "
                     f"{_pct(s['recall'])} | {_pct(s['category_recall'])} | {s['resolved']:,} | "
                     f"{_pct(s['other_flag_rate'])} | {_pct(s['raw_rate'])} | {s['old_flagged']:,} | "
                     f"{s['p_floor']:.4f} |")
    return [*lines, "", study["note"]]


def markdown(result: dict) -> str:
    return "\n".join(["# The near-tie table's DIF-sensitive rule on simulated DIF of known size (issue 46 item 5)", "",
                       f"{result['date']}; {result['machine']} (shared, loaded); command `{result['command']}`; "
                       f"{result['wall_s']:.0f} s wall, {result['cpu_s']:.0f} CPU-s.", "",
                       *(paragraph.replace("\n", " ") + "\n" for paragraph in _notes(result)),
                       *markdown_lines(result["study"])]) + "\n"


def _notes(result: dict) -> list[str]:
    """The module notes' definitions, and the testlets paragraph for a run with ``--testlets``."""
    paragraphs = __doc__.split("\n\n")
    testlet = any("testlets" in s["design"] for s in result["study"]["summary"])
    return [paragraphs[1], *([paragraphs[-1].rstrip()] if testlet else [])]


def main() -> None:
    import argparse
    import os
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from _common import machine, versions, write_results  # noqa: E402

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmarks", type=int, default=4)
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    parser.add_argument("--testlets", type=int, default=0, metavar="K",
                        help="items in testlets of K with model-by-testlet effects, with and without labels (module notes)")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    t0, c0 = time.perf_counter(), time.process_time()
    study = composition_study(args.benchmarks, tuple(args.designs), args.testlets)
    result = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "wall_s": time.perf_counter() - t0,
              "cpu_s": time.process_time() - c0,
              "command": f"nice -n 10 python benchmarks/audit_composition.py --benchmarks {args.benchmarks} --designs "
                         + " ".join(args.designs) + (f" --testlets {args.testlets}" if args.testlets else ""),
              "versions": versions(("bayesirt", "numpy", "scipy")), "study": study}
    name = "audit_composition_testlets.json" if args.testlets else "audit_composition.json"
    write_results(Path(__file__).parent / "results" / name, result, markdown, echo=True)


if __name__ == "__main__":
    main()
