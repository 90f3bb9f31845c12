"""Part 2 of ``benchmarks/audit_calibration.py``: the near-tie table's per-pair composition p
(``dif_p``) against the old ``excess_p`` on ``simulate_dif_benchmark`` designs with the
audit's Bayesian layer (issue 46 item 5).

* ``null``: no DIF at all (dif_sd 0): every flag is false.
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
"""

from __future__ import annotations

import time

import numpy as np
from scipy.special import expit

N_OWNERS, N_ITEMS, DRAWS = 60, 600, 100
DESIGNS = {"null": 0.0, "target-null": 0.8, "strong": 1.2}


def _eta(truth) -> np.ndarray:
    return truth["easiness"][:, None] + truth["loading"] @ truth["theta"].T


def one(design: str, seed: int) -> dict:
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
    ordered = (np.sign(with_dif[a] - with_dif[b]) != np.sign(without[a] - without[b])) if design == "strong" \
        else np.zeros(a.size, dtype=bool)
    flagged = table["dif_p"].to_numpy(float) <= 0.05
    return {"design": design, "seed": seed, "pairs": int(len(table)), "flagged": int(flagged.sum()),
            "dif_pairs": int(ordered.sum()), "dif_flagged": int((flagged & ordered).sum()),
            "other_flagged": int((flagged & ~ordered).sum()),
            "old_flagged": int((table["excess_p"].to_numpy(float) <= 0.05).sum()),
            "resolved_dif_sensitive": int((table["category"] == "resolved, DIF-sensitive").sum()),
            "audit_p": float(result.controls["p_value"].sel(pair_set="primary")), "models_moved": moved,
            "p_floor": float(table["dif_p"].min()) if len(table) else None,
            "seconds": time.perf_counter() - t0}


def composition_study(benchmarks: int) -> dict:
    rows = []
    for design in DESIGNS:
        for seed in range(benchmarks):
            rows.append(one(design, 500 + seed))
            r = rows[-1]
            print(f"composition {design} seed {seed}: {r['pairs']} pairs, {r['flagged']} flagged, {r['dif_pairs']} "
                  f"DIF-ordered ({r['dif_flagged']} flagged), old {r['old_flagged']}, {r['seconds']:.0f} s", flush=True)
    summary = []
    for design in DESIGNS:
        sel = [r for r in rows if r["design"] == design]
        tot = {k: sum(r[k] for r in sel) for k in ("pairs", "flagged", "dif_pairs", "dif_flagged", "other_flagged",
                                                    "old_flagged", "resolved_dif_sensitive")}
        summary.append({"design": design, "benchmarks": len(sel), **tot,
                        "flag_rate": tot["flagged"] / tot["pairs"] if tot["pairs"] else None,
                        "recall": tot["dif_flagged"] / tot["dif_pairs"] if tot["dif_pairs"] else None,
                        "other_flag_rate": (tot["other_flagged"] / (tot["pairs"] - tot["dif_pairs"])
                                            if tot["pairs"] > tot["dif_pairs"] else None),
                        "p_floor": 1 / 201, "audit_p": [r["audit_p"] for r in sel]})
    note = (f"{N_OWNERS} owners x 5 families, {N_ITEMS} items, {DRAWS} DIF draws per audit half. Null: no DIF. "
            "Target-null: DIF sd 0.8 on half of the items in fold 0's models only; the split is recomputed after "
            "removing the DIF, and when models still change fold (models_moved in the JSON) some target models carry "
            "DIF shared with the audit half, so flags are not all false. Strong: DIF sd 1.2 "
            "in every model; DIF-ordered = the pair's order in expected accuracy with the planted DIF differs from "
            "its order without it. Old excess_p <= .05: the rule before issue 46.")
    return {"summary": summary, "rows": rows, "note": note}
