"""Population robustness (NT 4.3, B.6, D.2 eq. 59-61): the audit rerun on perturbed populations.

Nine perturbations of the primary population: owner caps 1 and 3, a score-blind lexicographic
representative, the conservative lineage filter, and each family omitted in turn (as many as
the primary run had). Each keeps K frozen per audit fold at the primary run's values, refits the
spectral directions, the DIF and the three purification rounds, and compares the anchors with
200 matched-random controls (every retained family needs at least 15 models). The perturbations
run as independent tasks through :func:`bayesirt.utils.parallel.parallel_map`.

The pass rule of eq. 59-61 counts benchmarks: a perturbation passes when at least 3 of 5
benchmarks keep a positive excess and at least 3 have p <= .05 (:func:`perturbation_pass`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.audit.engine.result import AuditConfig, AuditResult, check_audit
from bayesirt.audit.primary import run_audit
from bayesirt.errors import BayesIRTError
from bayesirt.utils.parallel import parallel_map

__all__ = ["PERTURBATION_CONTROLS", "PERTURBATION_MIN_FAMILY", "perturbations", "population_perturbations",
           "perturbation_pass"]

PERTURBATION_CONTROLS = 200
PERTURBATION_MIN_FAMILY = 15


def perturbations(result: AuditResult) -> dict[str, AuditConfig]:
    """The NT D.2 perturbations of a primary run's configuration, by name."""
    base = replace(result.config, fixed_k=tuple(result.summary["selected_k"]), controls=PERTURBATION_CONTROLS,
                   bootstrap=0, owner_bootstrap=0, min_family_size=PERTURBATION_MIN_FAMILY, bayes=False,
                   sensitivity=False, quick=False)
    out = {"owner cap 1": replace(base, owner_cap=1), "owner cap 3": replace(base, owner_cap=3),
           "lexicographic representative": replace(base, representative="lexicographic"),
           "lineage filter": replace(base, lineage_filter=True)}
    families = result.summary["families"]
    for family in families:
        out[f"omit {family}"] = replace(base, families=tuple(f for f in families if f != family))
    return out


def _run(task) -> dict:
    name, responses, config = task
    try:
        run = run_audit(responses, config, progress=False)
    except BayesIRTError as err:  # a perturbed population can be too small: reported, not fatal
        return {"perturbation": name, "status": f"not run: {err}"}
    c = run.controls.sel(pair_set="primary") if run.controls is not None else None
    retained = run.population["status"] == "retained"
    return {"perturbation": name, "status": run.summary["status"],
            "models": int(retained.sum()), "owners": int(run.population.loc[retained, "owner"].nunique()),
            "representatives": run.summary["n_representatives"], "eligible_pairs": run.summary["eligible_pairs"],
            "low_dif_rate": run.summary["low_dif_reversal_rate"],
            "random_median": float(c["median"]) if c is not None else np.nan,
            "excess_pp": float(c["excess_pp"]) if c is not None else np.nan,
            "p_value": float(c["p_value"]) if c is not None else np.nan}


def population_perturbations(result: AuditResult, responses: xr.Dataset, *, workers: int | None = 1,
                             scheduler: str | None = None, progress: bool = False) -> pd.DataFrame:
    """Rerun the audit under each perturbation (K frozen, 200 controls).

    Returns
    -------
    pandas.DataFrame
        One row per perturbation: status, retained models and owners, representatives, eligible
        pairs, low-DIF and median random rates, ``excess_pp``, ``p_value``, and the two flags of
        eq. 59-60 for this benchmark: ``positive`` (excess > 0) and ``significant`` (p <= .05).
    """
    check_audit(result, responses, "population_perturbations")
    tasks = [(name, responses, config) for name, config in perturbations(result).items()]
    table = pd.DataFrame(parallel_map(_run, tasks, workers=workers, scheduler=scheduler, progress=progress,
                                      description="population perturbations"))
    table["positive"] = table["excess_pp"] > 0
    table["significant"] = table["p_value"] <= 0.05
    return table


def perturbation_pass(excess, p_value) -> pd.DataFrame:
    """NT eq. 59-61 across benchmarks.

    Parameters
    ----------
    excess, p_value : pandas.DataFrame
        Rows benchmarks, columns perturbations (NaN where not run).

    Returns
    -------
    pandas.DataFrame
        Per perturbation: ``G_dir`` (benchmarks with excess > 0), ``G_sig`` (with p <= .05) and
        ``passes`` (both >= 3).
    """
    g_dir = (excess > 0).sum(axis=0)
    g_sig = (p_value <= 0.05).sum(axis=0)
    return pd.DataFrame({"G_dir": g_dir, "G_sig": g_sig, "passes": (g_dir >= 3) & (g_sig >= 3)})
