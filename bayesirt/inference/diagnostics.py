"""Convergence diagnostics of a fit, and their translation into plain-language warnings.

Thresholds follow Vehtari et al. (2021, "Rank-normalization, folding, and localization"):
R-hat below 1.01 and bulk and tail ESS of at least 100 per chain; E-BFMI below 0.3 signals
that the sampler explores the energy distribution poorly (Betancourt 2016).
"""

from __future__ import annotations

import json

import arviz as az
import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.models.logistic import with_difficulty

__all__ = ["element_diagnostics", "convergence_table", "diagnose", "RHAT_MAX", "ESS_PER_CHAIN_MIN", "EBFMI_MIN"]

RHAT_MAX = 1.01
ESS_PER_CHAIN_MIN = 100
EBFMI_MIN = 0.3


def element_diagnostics(tree: xr.DataTree) -> dict[str, xr.Dataset]:
    """R-hat, bulk ESS and tail ESS of every element of the posterior variables (and of the
    difficulty, derived when not stored: the tables report it).

    A fit's posterior holds the spec's parameters only, so the sampler's own coordinates are not
    judged: their problems show in the parameters they determine. ArviZ computes these element
    by element (about 3 s per statistic for 2,854 items), so a job computes them once and passes
    them to :func:`diagnose` and the tables.
    """
    post = with_difficulty(tree["posterior"].to_dataset())

    def as_dataset(x):
        return x.to_dataset() if isinstance(x, xr.DataTree) else x

    return {"r_hat": as_dataset(az.rhat(post)), "ess_bulk": as_dataset(az.ess(post, method="bulk")),
            "ess_tail": as_dataset(az.ess(post, method="tail"))}


def convergence_table(tree: xr.DataTree, stats: dict[str, xr.Dataset] | None = None) -> pd.DataFrame:
    """Per reported posterior variable: worst R-hat, smallest bulk and tail ESS, and where they
    occur. ``stats`` is :func:`element_diagnostics` of ``tree`` (computed when not given)."""
    stats = element_diagnostics(tree) if stats is None else stats
    rhat, ess_bulk, ess_tail = stats["r_hat"], stats["ess_bulk"], stats["ess_tail"]
    rows = []
    for name in rhat.data_vars:
        row = {"variable": name}
        for label, ds, worst in (("r_hat", rhat, np.nanargmax), ("ess_bulk", ess_bulk, np.nanargmin),
                                 ("ess_tail", ess_tail, np.nanargmin)):
            values = np.atleast_1d(ds[name].values).ravel()
            if np.all(np.isnan(values)):
                row[label], row[f"{label}_at"] = np.nan, ""
                continue
            k = int(worst(values))
            row[label] = float(values[k])
            row[f"{label}_at"] = _element_label(ds[name], k)
        rows.append(row)
    return pd.DataFrame(rows)


def _element_label(da: xr.DataArray, flat_index: int) -> str:
    if da.ndim == 0:
        return ""
    idx = np.unravel_index(flat_index, da.shape)
    return ", ".join(str(da[dim].values[i]) for dim, i in zip(da.dims, idx))


def diagnose(tree: xr.DataTree, stats: dict[str, xr.Dataset] | None = None) -> list[str]:
    """Plain-language warnings about a fit; an empty list means every check passed.

    NUTS fits are checked for R-hat, bulk/tail ESS, divergences, E-BFMI and tree-depth saturation;
    ADVI fits for reaching the iteration cap (and always reminded that ADVI under-disperses);
    Laplace fits are reminded that they are one Gaussian, MAP fits that they carry no uncertainty.
    ``stats``: :func:`element_diagnostics` of ``tree``, when already computed.
    """
    settings = json.loads(tree.attrs.get("bayesirt_settings", "{}"))
    method = settings.get("method", "nuts")
    if method in ("map", "joint_map"):  # MAP-EM (fit --method map) or sample_model's joint MAP
        return ["MAP gives a point estimate only: the tables show no posterior uncertainty (refit with --method nuts)."]
    if method == "laplace":
        return ["The Laplace fit is one Gaussian approximation of the posterior (2PL, priors fixed at the spec's "
                "numbers): it cannot show skewed posteriors (items answered by few models, extreme items); confirm "
                "close decisions with NUTS on a subset."]
    if method in ("advi", "fullrank_advi"):
        out = ["ADVI approximates the posterior and is known to under-disperse it: intervals are too narrow; "
               "confirm decisions with NUTS."]
        if not tree.attrs.get("advi_converged", 1):
            out.append(f"ADVI stopped at its iteration cap ({settings.get('advi_iterations')}) before the parameters "
                       "settled: raise --advi-iterations or use NUTS.")
        return out

    out = []
    chains = tree["posterior"].sizes["chain"]
    table = convergence_table(tree, stats)
    ess_min = ESS_PER_CHAIN_MIN * chains
    for row in table.itertuples():
        if row.r_hat > RHAT_MAX:
            out.append(f"R-hat of {row.variable} reaches {row.r_hat:.3f} (at {row.r_hat_at}), above {RHAT_MAX}: "
                       "the chains disagree; run longer (--tune, --draws) before trusting these estimates.")
        for kind in ("bulk", "tail"):
            ess = getattr(row, f"ess_{kind}")
            if ess < ess_min:
                where = getattr(row, f"ess_{kind}_at")
                out.append(f"{kind.capitalize()} effective sample size of {row.variable} is only {ess:.0f} (at {where}), "
                           f"below {ess_min} ({ESS_PER_CHAIN_MIN} per chain): "
                           + ("means and sds" if kind == "bulk" else "interval ends") + " are imprecise; draw more.")
    stats = tree["sample_stats"].to_dataset() if "sample_stats" in tree.children else xr.Dataset()
    if "diverging" in stats:
        n_div = int(stats["diverging"].sum())
        if n_div:
            n = stats["diverging"].size
            out.append(f"{n_div} of {n} draws ended in a divergent transition: the sampler could not follow the "
                       "posterior's curvature, so estimates may be biased; tighten priors or reparameterize.")
    if "energy" in stats:
        bfmi = np.atleast_1d(az.bfmi(tree)["energy"].values)
        low = [f"{b:.2f}" for b in bfmi if b < EBFMI_MIN]
        if low:
            out.append(f"E-BFMI is low in {len(low)} chain(s) ({', '.join(low)} < {EBFMI_MIN}): "
                       "the sampler explores the posterior's tails poorly.")
    for key in ("maxdepth_reached", "reached_max_treedepth"):
        if key in stats and bool(stats[key].any()):
            share = float(stats[key].mean())
            out.append(f"{share:.1%} of draws hit the maximum tree depth: sampling is slow, not wrong; "
                       "consider more tuning.")
    return out
