"""Diagnostics that read a finished primary audit (NT 4.1, 4.4; App. B.2, D.1, D.3): item-signature
replication across the owner halves with item-group attribution, and the discrimination- and
reliability-matched controls."""

from __future__ import annotations

import xarray as xr

from bayesirt.audit.diagnostics.matched import discrimination_matched_controls
from bayesirt.audit.diagnostics.profiles import profile_matching
from bayesirt.audit.diagnostics.replication import group_contributions, item_group_attribution, signature_replication
from bayesirt.audit.engine.result import AuditResult
from bayesirt.audit.perturbations import population_perturbations
from bayesirt.utils.parallel import spawn_seeds

__all__ = ["add_diagnostics"]


def add_diagnostics(result: AuditResult, responses: xr.Dataset, *, replication: bool = True, matched: bool = False,
                    perturbations: bool = False, profiles: bool = False, workers: int | None = 1,
                    scheduler: str | None = None, progress: bool = False) -> AuditResult:
    """Attach the diagnostics to ``result`` (in place; also returned).

    ``replication``: :mod:`bayesirt.audit.diagnostics.replication` (signatures, item groups, contributions;
    permutations seeded from the audit's seed). ``matched``: :mod:`bayesirt.audit.diagnostics.matched`
    (as many replicates as the primary controls, on their own random stream). ``perturbations``:
    :mod:`bayesirt.audit.perturbations` (nine reruns, K frozen). ``profiles``:
    :mod:`bayesirt.audit.diagnostics.profiles` (capability-profile matching, App. G). Skipped when the audit
    was not estimable.
    """
    if result.summary["status"] != "estimated":
        return result
    # children 0-4 of the audit seed drive the primary run (run_audit); these take 5, 6 and 7
    replication_seed, matched_seed, profile_seed = spawn_seeds(result.config.seed, 8)[5:]
    if replication:
        result.replication = {
            "signatures": signature_replication(result, responses, seed=replication_seed),
            "groups": item_group_attribution(result, responses),
            "contributions": group_contributions(result, responses),
        }
        sig = result.replication["signatures"]
        result.summary["replication"] = {s: {"observed": float(sig["observed"].sel(statistic=s)),
                                             "p_value": float(sig["p_value"].sel(statistic=s))}
                                         for s in sig["statistic"].values}
    if matched:
        result.matched = discrimination_matched_controls(result, responses, replicates=result.config.controls,
                                                         seed=matched_seed, workers=workers,
                                                         scheduler=scheduler, progress=progress)
        primary = result.matched.sel(pair_set="primary")
        result.summary["matched_controls"] = {
            "excess_pp": float(primary["excess_pp"]), "p_value": float(primary["p_value"]),
            **{k: float(result.matched[k]) for k in ("g_ratio", "citc_ratio", "sem_ratio", "abs_delta_alpha")}}
    if profiles:
        result.profiles = profile_matching(result, responses, replicates=result.config.controls, seed=profile_seed,
                                           workers=workers, scheduler=scheduler, progress=progress)
        p = result.profiles
        result.summary["profiles"] = {
            str(s): {"coverage": float(p["pooled_coverage"].sel(scenario=s)),
                     "mixture_excess_pp": float(p["excess_pp"].sel(scenario=s)),
                     "mixture_p": float(p["p_value"].sel(scenario=s)),
                     "swap_delta_pp": float(p["delta_swap_pp"].sel(scenario=s)),
                     "swap_p": float(p["p_swap"].sel(scenario=s))} for s in p["scenario"].values}
    if perturbations:
        result.perturbations = population_perturbations(result, responses, workers=workers, scheduler=scheduler,
                                                        progress=progress)
        result.summary["perturbations"] = result.perturbations.to_dict(orient="records")
    return result
