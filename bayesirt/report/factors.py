"""Outputs of the factor-structure job (:func:`bayesirt.jobs.structure.run_factors_job`): ``factors.nc``
(a labelled DataTree), CSV tables, ``report.md`` and the factor-selection figure (SAFE Figure 9)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display is assumed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import xarray as xr  # noqa: E402

from bayesirt.report.markdown import markdown_table  # noqa: E402
from bayesirt.structure.factor import improper_variables  # noqa: E402
from bayesirt.structure.polarity import AUTO_POLARITY_THRESHOLD, flagged_polarity  # noqa: E402
from bayesirt.utils.outputs import staged_output, write_netcdf  # noqa: E402

__all__ = ["factors_tree", "write_factors", "factors_report", "plot_factor_selection", "solution_flags", "CFI_GOOD",
           "RMSEA_CLOSE"]

CFI_GOOD = 0.95  # conventional thresholds (SAFE App. D)
RMSEA_CLOSE = 0.06
_FIT_COLUMNS = ("chi2", "dof", "rmsea", "cfi", "tli", "p_value", "objective", "null_chi2", "null_dof")
CONVENTIONS = (
    "Minimum-residual (ULS) extraction; uniquenesses bounded to [0.005, 1]. Fit indices follow R psych `fa`: "
    "F = tr(S^-1 R) - log det(S^-1 R) - p with S = L Phi L' (unit diagonal); chi2 = (n - 1 - (2p + 5)/6 - 2k/3) F "
    "(Bartlett) on dof = ((p - k)^2 - (p + k))/2; RMSEA = sqrt(max(F/dof - 1/(n - 1), 0)); TLI = (F0/dof0 - F/dof) / "
    "(F0/dof0 - 1/m) with F0 = -log det R, dof0 = p(p - 1)/2 and m the Bartlett multiplier; CFI = 1 - max(chi2 - dof, "
    "0) / max(chi2_0 - dof0, chi2 - dof, 0) with chi2_0 = (n - 1 - (2p + 5)/6) F0 (Bentler 1990). n is the smallest "
    "pairwise-complete number of models.")


def _factors(k: int) -> list[str]:
    return [f"F{j + 1}" for j in range(k)]


def _solutions_dataset(solutions, width: int) -> xr.Dataset:
    def pad(a, shape):
        out = np.full(shape, np.nan)
        out[tuple(slice(0, s) for s in a.shape)] = a
        return out

    p = len(solutions[0].variables)
    data = {
        "loadings": (("n_factors", "benchmark", "factor"), [pad(s.loadings, (p, width)) for s in solutions]),
        "unrotated_loadings": (("n_factors", "benchmark", "factor"), [pad(s.unrotated, (p, width)) for s in solutions]),
        "phi": (("n_factors", "factor", "other_factor"), [pad(s.phi, (width, width)) for s in solutions]),
        "rotation_matrix": (("n_factors", "factor", "other_factor"),
                            [pad(s.rotation_matrix, (width, width)) for s in solutions]),
        "communality": (("n_factors", "benchmark"), [s.communalities for s in solutions]),
        "uniqueness": (("n_factors", "benchmark"), [s.uniquenesses for s in solutions]),
        "variance_explained": ("n_factors", [s.variance_explained for s in solutions]),
        "converged": ("n_factors", [s.converged for s in solutions]),
        "heywood": ("n_factors", [s.heywood for s in solutions]),
        **{c: ("n_factors", [getattr(s.fit, c) for s in solutions]) for c in _FIT_COLUMNS},
    }
    coords = {"n_factors": [s.n_factors for s in solutions], "benchmark": list(solutions[0].variables),
              "factor": _factors(width), "other_factor": _factors(width)}
    return xr.Dataset(data, coords=coords,
                      attrs={"n_obs": solutions[0].fit.n_obs, "rotation": solutions[0].rotation,
                             "gamma": solutions[0].gamma, "conventions": CONVENTIONS})


def _parallel_dataset(parallel, p: int) -> xr.Dataset:
    return xr.Dataset(
        {name: ("rank", getattr(parallel, name)) for name in ("observed_fa", "reference_fa", "observed_pc",
                                                              "reference_pc")},
        coords={"rank": np.arange(1, p + 1)},
        attrs={"n_factors": parallel.n_factors, "n_components": parallel.n_components,
               "quantile": parallel.quantile, "n_iter": parallel.n_iter, "communalities": parallel.communalities})


def _bootstrap_dataset(intervals, solutions, width: int) -> xr.Dataset:
    padded = [b.reindex(factor=_factors(width), other_factor=_factors(width)) for b in intervals]
    boot = xr.concat(padded, dim=pd.Index([s.n_factors for s in solutions], name="n_factors"),
                     combine_attrs="drop_conflicts")
    boot.attrs["failed_replicates"] = [int(b.attrs["failed_replicates"]) for b in intervals]
    return boot


def factors_tree(*, abilities: xr.Dataset, correlation: pd.DataFrame, corrected, solutions, parallel, intervals,
                 polarity: pd.DataFrame, composite: pd.Series, settings: dict,
                 alignment: pd.DataFrame | None = None) -> xr.DataTree:
    """Everything the job computed, labelled by ``model``, ``benchmark``, ``factor`` and ``n_factors``.
    ``corrected``: None, or the measurement-error-corrected analysis ``(Disattenuated, solutions,
    parallel, intervals)`` (nodes ``solutions_corrected``, ``parallel_corrected``, ``bootstrap_corrected``)."""
    width = max(s.n_factors for s in solutions)
    labels = list(correlation.columns)
    pair = {"benchmark": labels, "other_benchmark": labels}
    correlations = {"correlation": (("benchmark", "other_benchmark"), correlation.to_numpy())}
    disattenuated = corrected[0] if corrected is not None else None
    if disattenuated is not None:
        correlations |= {"corrected": (("benchmark", "other_benchmark"), disattenuated.corrected.to_numpy()),
                         "reliability": ("benchmark", disattenuated.reliability.to_numpy())}
    nodes = {
        "abilities": abilities.assign(composite=("model", composite.reindex(abilities["model"].values.astype(str))
                                                 .to_numpy())),
        "correlation": xr.Dataset(correlations, coords=pair,
                                  attrs={"n_obs": solutions[0].fit.n_obs, "method": "pairwise-complete Pearson",
                                         "corrected": "disattenuated by the marginal reliabilities"
                                                      + (" (smoothed to positive definite)"
                                                         if disattenuated is not None and disattenuated.smoothed
                                                         else "")
                                         if disattenuated is not None else "no (the raw matrix is analysed)"}),
        "solutions": _solutions_dataset(solutions, width),
        "parallel": _parallel_dataset(parallel, len(labels)),
        "polarity": xr.Dataset.from_dataframe(polarity.astype({"agree": int, "credibly_negative": int,
                                                               "auto_reversible": int})),
    }
    if alignment is not None and len(alignment):
        nodes["alignment"] = xr.Dataset.from_dataframe(alignment.set_index("composite"))
    if intervals:
        nodes["bootstrap"] = _bootstrap_dataset(intervals, solutions, width)
    if corrected is not None:
        _, c_solutions, c_parallel, c_intervals = corrected
        nodes["solutions_corrected"] = _solutions_dataset(c_solutions, width)
        nodes["parallel_corrected"] = _parallel_dataset(c_parallel, len(labels))
        if c_intervals:
            nodes["bootstrap_corrected"] = _bootstrap_dataset(c_intervals, c_solutions, width)
    tree = xr.DataTree.from_dict(nodes)
    tree.attrs = {"settings": json.dumps(settings), "reference": "SAFE Latent Ability Inference and App. D"}
    return tree


def _interval(mean: float, lower: float, upper: float) -> str:
    return "" if np.isnan(mean) else f"{mean:.2f} [{lower:.2f}, {upper:.2f}]"


def _loadings_table(solution, boot: xr.Dataset | None) -> pd.DataFrame:
    names = _factors(solution.n_factors)
    table = pd.DataFrame(solution.loadings, columns=names, index=pd.Index(solution.variables, name="benchmark"))
    table["communality"], table["uniqueness"] = solution.communalities, solution.uniquenesses
    if boot is not None:
        for f in names:
            for bound in ("lower", "upper"):
                table[f"{f}_{bound}"] = boot[f"loadings_{bound}"].sel(factor=f).to_numpy()
    return table


def _selection_lines(solutions, parallel, matrix: str = "the ability estimates") -> list[str]:
    def first(test):
        hits = [s for s in solutions if test(s)]
        if not hits:
            return "none of the solutions"
        improper = any(f.startswith("Heywood") for f in solution_flags(hits[0]))
        return f"{hits[0].n_factors}" + (" (an improper solution: see the note above)" if improper else "")

    return [f"- CFI first reaches {CFI_GOOD} at: {first(lambda s: s.fit.cfi >= CFI_GOOD)}.",
            f"- RMSEA first reaches close fit (<= {RMSEA_CLOSE}) at: {first(lambda s: s.fit.rmsea <= RMSEA_CLOSE)}.",
            f"- Horn's parallel analysis ({parallel.n_iter:,} random-normal data sets, "
            f"{parallel.quantile:.0%} quantile) retains {parallel.n_factors} factor(s) on the reduced matrix "
            f"({parallel.communalities} communalities) and {parallel.n_components} component(s) in the PCA variant "
            f"(on {matrix}, the matrix the solutions are fitted to)."] + _beyond_fitted(solutions, parallel)


def _beyond_fitted(solutions, parallel) -> list[str]:
    """A remark when parallel analysis retains more factors than any solution fitted (too few
    benchmarks identify them)."""
    fitted = max((s.n_factors for s in solutions), default=0)
    if parallel.n_factors <= fitted:
        return []
    return [f"- **Note.** Parallel analysis retains {parallel.n_factors} factor(s), more than the {fitted} that "
            f"could be fitted to {len(solutions[0].variables) if solutions else 0} benchmarks (a solution needs "
            f"non-negative degrees of freedom); the retained count is an upper bound here, and the suite reads the "
            f"largest proper fitted solution at or below it."]


def solution_flags(solution) -> list[str]:
    """What makes a solution improper or its fit index unreadable: a Heywood case (a uniqueness at
    or below the lower bound, or a loading of absolute value 1 or more) and an RMSEA above 1."""
    names = np.asarray(solution.variables)
    flags = []
    low, big = improper_variables(solution.loadings, solution.uniquenesses)
    if low.any():
        flags.append("Heywood: uniqueness at its bound for " + ", ".join(names[low]))
    if big.any():
        flags.append("Heywood: a loading of 1 or more for " + ", ".join(names[big]))
    if np.isfinite(solution.fit.rmsea) and solution.fit.rmsea > 1:
        flags.append(f"RMSEA {solution.fit.rmsea:.2f} > 1")
    return flags


def _fit_frame(solutions) -> pd.DataFrame:
    return pd.DataFrame([{"factors": s.n_factors, "chi2": s.fit.chi2, "dof": s.fit.dof, "RMSEA": s.fit.rmsea,
                          "CFI": s.fit.cfi, "TLI": s.fit.tli, "variance explained": s.variance_explained,
                          "Heywood": s.heywood,
                          "flags": "; ".join(solution_flags(s)) or "-"} for s in solutions])


def _flag_lines(solutions) -> list[str]:
    """A sentence per kind of flag in the fit table: what it means and what to do."""
    flagged = {s.n_factors: solution_flags(s) for s in solutions}
    heywood = [k for k, f in flagged.items() if any(x.startswith("Heywood") for x in f)]
    rmsea = [k for k, f in flagged.items() if any(x.startswith("RMSEA") for x in f)]
    lines = []
    if heywood:
        lines.append(f"- **Improper solution (Heywood case) at {', '.join(map(str, heywood))} factor(s).** A "
                     "benchmark's uniqueness reached its lower bound, or a loading reached 1: the factors claim all of "
                     "that benchmark's variance, which no real measurement allows. It usually means too many factors "
                     "for the number of benchmarks, or too few models. Do not interpret these loadings; read the "
                     "solution with fewer factors (the SAFE suite builds no latent-ability item bank from an improper "
                     "solution) or add benchmarks or models.")
    if rmsea:
        lines.append(f"- **RMSEA above 1 at {', '.join(map(str, rmsea))} factor(s).** RMSEA is the misfit per degree "
                     "of freedom, and values above 0.1 already mean poor fit; above 1 it is dominated by having very "
                     f"few degrees of freedom (dof in the table) and models (n = {solutions[0].fit.n_obs}), so the index "
                     "says nothing useful about that solution. Choose the number of factors by parallel analysis and "
                     "the loadings' bootstrap intervals instead.")
    return lines + [""] * bool(lines)


def _solution_lines(solutions, intervals, *, title: str, recomputed: str) -> list[str]:
    lines = []
    for s in solutions:
        boot = next((b for b in intervals if b.attrs["n_factors"] == s.n_factors), None)
        lines += [f"## {s.n_factors}-factor solution{title}", ""]
        table = _loadings_table(s, boot).reset_index()
        if boot is not None:
            for f in _factors(s.n_factors):
                table[f] = [_interval(m, lo, hi) for m, lo, hi in
                            zip(table[f], table[f"{f}_lower"], table[f"{f}_upper"])]
            table = table.drop(columns=[c for c in table.columns if c.endswith(("_lower", "_upper"))])
            lines += [f"Loadings with {boot.attrs['ci']:.0%} percentile intervals from {boot.sizes['replicate']} "
                      f"bootstrap resamples of the models ({recomputed} recomputed in each, aligned to this solution; "
                      f"median congruence {float(boot['congruence'].median()):.3f}, "
                      f"{boot.attrs['failed_replicates']} unusable resamples).", ""]
        lines += [markdown_table(table), ""]
        if s.n_factors > 1 and s.rotation == "oblimin":
            phi = pd.DataFrame(s.phi, columns=_factors(s.n_factors))
            if boot is not None:
                phi = pd.DataFrame([[_interval(s.phi[i, j], float(boot["phi_lower"][i, j]),
                                               float(boot["phi_upper"][i, j])) for j in range(s.n_factors)]
                                    for i in range(s.n_factors)], columns=_factors(s.n_factors))
            lines += ["Factor correlations (phi):", "", markdown_table(phi.assign(factor=_factors(s.n_factors))
                                                                     [["factor", *_factors(s.n_factors)]]), ""]
        warnings = [f"{flag}: an improper solution, see the fit table's note; do not interpret these loadings"
                    for flag in solution_flags(s) if flag.startswith("Heywood")]
        if not s.converged:
            warnings.append("the extraction or rotation did not converge")
        lines += [f"- **Warning.** {w}" for w in warnings] + [""] * bool(warnings)
    return lines


def _polarity_lines(polarity: pd.DataFrame, settings: dict) -> list[str]:
    threshold = settings.get("auto_polarity_threshold", AUTO_POLARITY_THRESHOLD)
    shown = polarity.reset_index()
    shown["general loading"] = [_interval(m, lo, hi) if np.isfinite(lo) else f"{m:.2f}"
                                for m, lo, hi in zip(shown["general_loading"], shown["lower"], shown["upper"])]
    shown = shown[["benchmark", "general loading", "credibly_negative", "auto_reversible", "declared", "polarity",
                   "source"]]
    lines = ["## Polarity", "",
             "Only declared benchmarks are reversed (SAFE reverses OR-Bench-Hard, whose construct, over-refusal, points "
             "the other way)" + (f"; with polarity auto also the undeclared benchmarks whose general-factor loading's "
                                 f"bootstrap interval lies entirely below {threshold}" if settings.get("auto_polarity")
                                 else "; `--polarity auto` would also reverse undeclared benchmarks whose "
                                      f"general-factor loading's bootstrap interval lies entirely below {threshold}")
             + ". General loading: the one-factor solution of the matrix above, reflected so that most benchmarks "
               "load positively" + (", with its bootstrap interval." if np.isfinite(polarity["lower"]).any()
                                    else " (no bootstrap: no interval, nothing is flagged).")
             + " Composites multiply a reversed benchmark's standardized scores by -1 (composite.csv). Scale of "
               "composite.csv: the mean over a model's benchmarks of its z-scored MAP ability (z over the cohort); "
               "the cat step's composite bank is scored on another scale, the mean of the benchmarks' proportions "
               "correct (its full score), so the two composites are not interchangeable numbers.", "",
             markdown_table(shown.round(3)), ""]
    flagged = flagged_polarity(polarity)
    lines += [f"- **Credibly negative, not reversed.** {line}." for line in flagged] + [""] * bool(flagged)
    conflicts = list(polarity.index[~polarity["agree"]])
    if conflicts:
        lines += [f"- **Warning.** the declared polarity of {', '.join(conflicts)} contradicts the sign of its "
                  "general-factor loading; the declaration was used.", ""]
    return lines


def _alignment_lines(alignment: pd.DataFrame | None) -> list[str]:
    if alignment is None or not len(alignment):
        return []
    return ["## Composite alignment (SAFE App. D, Table 5)", "",
            "Mean pairwise ability correlation among a composite's members as scored (unflipped) and after its "
            "flips (signed): a composite is coherent, and recoverable from few items, only when its members agree in "
            "sign. `against`: members whose mean signed correlation with the others stays negative. Composites: all "
            "benchmarks (flips: polarity -1) and each latent-ability cluster of the retained solution (flips: its "
            "members loading negatively). Recovery of each from 25 adaptive items is in the cat step "
            "(cat/<bank>/report.md).", "", markdown_table(alignment.round(3)), ""]


def factors_report(*, abilities: xr.Dataset, corrected, solutions, parallel, intervals, polarity: pd.DataFrame,
                   settings: dict, figure: str | None, alignment: pd.DataFrame | None = None) -> str:
    """The Markdown report: model selection (fit indices, parallel analysis), polarity with intervals,
    composite alignment, loadings and phi; the measurement-error-corrected analysis beside it."""
    p, n_models = len(solutions[0].variables), abilities.sizes["model"]
    if len(settings["inputs"]) > 1:
        estimate = ("MAP-EM items, MAP (posterior-mode) abilities" if settings.get("estimate", "mode") == "mode"
                    else "MAP-EM items, EAP abilities") if settings["method"] == "map" \
            else settings["method"] + " posterior means"
        source = f"2PL abilities ({estimate}) of {len(settings['inputs'])} response files"
    else:
        source = f"ability CSV {settings['inputs'][0]}"
    lines = ["# Factor structure of abilities", "",
             f"{n_models} models x {p} benchmarks ({source}; {settings['cohort']} cohort"
             + (": models with every benchmark, SAFE's cohort" if settings["cohort"] == "complete" else "")
             + f"); fit indices use n = {solutions[0].fit.n_obs} (smallest pairwise-complete count). "
             f"Rotation: {solutions[0].rotation}"
             + (f" (gamma = {solutions[0].gamma:g})" if solutions[0].rotation == "oblimin" else "") + ".", "",
             "As SAFE (Latent Ability Inference, App. D), the factor solutions, the parallel analysis and the bootstrap "
             "intervals all use the raw correlation matrix of the ability estimates (factors.nc correlation/correlation)"
             + ("; the analysis corrected for measurement error is reported below it." if corrected is not None
                else "."), ""]
    dropped = {b: len(v) for b, v in json.loads(abilities.attrs.get("dropped_items", "{}")).items() if v}
    if dropped:
        lines += ["Items without variance (all models right or all wrong) were removed before the fits: "
                  + ", ".join(f"{b} {n}" for b, n in dropped.items()) + " (listed in factors.nc).", ""]
    lines += ["## Number of factors", "", markdown_table(_fit_frame(solutions)), "", *_flag_lines(solutions),
              *_selection_lines(solutions, parallel, "the raw ability correlations"), ""]
    if figure:
        lines += [f"![Factor selection]({figure})", ""]
    lines += [f"Conventions: {CONVENTIONS}", "", *_polarity_lines(polarity, settings), *_alignment_lines(alignment)]
    unconverged = [b for b, f in json.loads(abilities.attrs.get("fits", "{}")).items()
                   if f.get("advi_converged") == 0 or f.get("converged") == 0]
    if unconverged:
        lines += [f"- **Warning.** the 2PL fit did not converge on {', '.join(unconverged)}; raise the iteration cap "
                  "or check the data.", ""]
    lines += _solution_lines(solutions, intervals, title="", recomputed="correlations and factor solution")
    if corrected is not None:
        disattenuated, c_solutions, c_parallel, c_intervals = corrected
        rel = ", ".join(f"{b} {r:.3f}" for b, r in disattenuated.reliability.items())
        both = _fit_frame(solutions)[["factors", "RMSEA", "CFI", "TLI", "variance explained", "Heywood"]].merge(
            _fit_frame(c_solutions)[["factors", "RMSEA", "CFI", "TLI", "variance explained", "Heywood"]],
            on="factors", suffixes=(" raw", " corrected"))
        lines += ["# Corrected for measurement error (option)", "",
                  "The same analysis on the correlations of the latent abilities: each benchmark's EAP abilities carry "
                  f"measurement error (marginal reliability {rel}), which attenuates their correlations, so these are "
                  "divided by sqrt(rho_j rho_k)"
                  + (" and the result moved to the nearest positive-definite correlation matrix"
                     if disattenuated.smoothed else "")
                  + ". Parallel analysis and bootstrap run on this matrix too. Fit indices of both analyses:", "",
                  markdown_table(both), "", *_flag_lines(c_solutions),
                  *_selection_lines(c_solutions, c_parallel, "the corrected correlations"),
                  ""]
        lines += _solution_lines(c_solutions, c_intervals, title=" (corrected)",
                                 recomputed="reliabilities, correction and factor solution")
    return "\n".join(lines).rstrip() + "\n"


def plot_factor_selection(solutions, parallel, path: Path) -> Path:
    """Two panels (SAFE Figure 9): CFI and RMSEA by number of factors; observed eigenvalues against
    the parallel-analysis reference (reduced matrix solid, PCA variant dashed)."""
    ks = [s.n_factors for s in solutions]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(ks, [s.fit.cfi for s in solutions], "o-", label="CFI")
    left.plot(ks, [s.fit.rmsea for s in solutions], "s-", label="RMSEA")
    left.axhline(CFI_GOOD, color="C0", ls=":", lw=1)
    left.axhline(RMSEA_CLOSE, color="C1", ls=":", lw=1)
    left.set(xlabel="number of factors", ylabel="fit index", title="(A) fit by number of factors", xticks=ks)
    flagged = [(s.n_factors, solution_flags(s)) for s in solutions if solution_flags(s)]
    for k, flags in flagged:
        short = " + ".join(dict.fromkeys("Heywood" if f.startswith("Heywood") else "RMSEA > 1" for f in flags))
        left.axvline(k, color="C3", lw=6, alpha=0.15)
        left.annotate(short, (k, 0.5), xycoords=("data", "axes fraction"), rotation=90, ha="center", va="center",
                      fontsize=8, color="C3")
    if flagged:
        left.text(0.01, 0.01, "shaded: improper solution or RMSEA > 1 (see report)", transform=left.transAxes,
                  fontsize=7, color="C3")
    left.legend(fontsize=8)
    rank = np.arange(1, len(parallel.observed_fa) + 1)
    right.plot(rank, parallel.observed_fa, "o-", color="C0", label=f"observed (reduced, {parallel.communalities})")
    right.plot(rank, parallel.reference_fa, "-", color="C3", label=f"random data, {parallel.quantile:.0%} quantile")
    right.plot(rank, parallel.observed_pc, "o--", color="C0", alpha=0.5, label="observed (PCA)")
    right.plot(rank, parallel.reference_pc, "--", color="C3", alpha=0.5, label="random data (PCA)")
    if parallel.n_factors:
        right.axvspan(0.5, parallel.n_factors + 0.5, color="0.9", zorder=0)
    right.set(xlabel="rank", ylabel="eigenvalue", xticks=rank,
              title=f"(B) parallel analysis: {parallel.n_factors} factor(s) retained")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _write_solutions(folder: Path, solutions, intervals, parallel, suffix: str) -> None:
    pd.DataFrame([{"n_factors": s.n_factors, **{c: getattr(s.fit, c) for c in _FIT_COLUMNS},
                   "variance_explained": s.variance_explained, "converged": s.converged, "heywood": s.heywood,
                   "flags": "; ".join(solution_flags(s))}
                  for s in solutions]).to_csv(folder / f"fit_indices{suffix}.csv", index=False)
    for s in solutions:
        boot = next((b for b in intervals if b.attrs["n_factors"] == s.n_factors), None)
        _loadings_table(s, boot).to_csv(folder / f"loadings{suffix}_{s.n_factors}.csv")
        if s.n_factors > 1 and s.rotation == "oblimin":
            pd.DataFrame(s.phi, index=pd.Index(_factors(s.n_factors), name="factor"),
                         columns=_factors(s.n_factors)).to_csv(folder / f"phi{suffix}_{s.n_factors}.csv")
    pd.DataFrame({"rank": np.arange(1, len(parallel.observed_fa) + 1), "observed_fa": parallel.observed_fa,
                  "reference_fa": parallel.reference_fa, "observed_pc": parallel.observed_pc,
                  "reference_pc": parallel.reference_pc}).to_csv(folder / f"parallel{suffix}.csv", index=False)


def _distinguish_lines(distinguished: pd.DataFrame, matched) -> str:
    lines = ["", "## Pair distinguishability (SAFE Ability shift, Figure 5B)", "",
             "Share of pairs of models (observed on every benchmark) whose abilities differ by more than 1.96 sds of "
             "their difference, per benchmark and on at least one (`any`). "
             + ("The first column uses each benchmark's static test of the stated length, of the design `static_design` "
                "in the settings (SAFE's is the maximum-information test; a "
                "40-item test distinguishes 99.5% of pairs), the second the full benchmark."
                if distinguished.shape[1] > 1 else "Full benchmarks (no short test: abilities given or not MAP)."), "",
             markdown_table(distinguished.map(lambda v: f"{v:.1%}").rename_axis("benchmark").reset_index()), ""]
    if matched is not None:
        pairs, summary = matched
        lines += [f"Ability-matched pairs (the short test separates them on no benchmark): {summary['matched']:,} of "
                  f"{summary['pairs']:,} pairs; they still disagree on a median of "
                  f"{summary['median_disagreements']:,.0f} items across the battery (matched_pairs.csv); the fewest "
                  f"disagreements of any pair: {summary['min_disagreements']:,} (0: identical responses, e.g. one "
                  "model listed twice). Response fingerprints separate what abilities cannot.", ""]
    return "\n".join(lines)


def write_factors(out: str | os.PathLike, *, abilities: xr.Dataset, correlation: pd.DataFrame, corrected, solutions,
                  parallel, intervals, polarity: pd.DataFrame, composite: pd.Series, settings: dict,
                  alignment: pd.DataFrame | None = None, distinguished: pd.DataFrame | None = None,
                  matched: tuple | None = None, force: bool = False) -> Path:
    """Write the job's folder atomically (staged, then renamed into place)."""
    with staged_output(out, force=force) as folder:
        write_netcdf(factors_tree(abilities=abilities, correlation=correlation, corrected=corrected,
                                  solutions=solutions, parallel=parallel, intervals=intervals, polarity=polarity,
                                  composite=composite, settings=settings, alignment=alignment), folder / "factors.nc")
        _write_solutions(folder, solutions, intervals, parallel, "")
        if corrected is not None:
            _write_solutions(folder, corrected[1], corrected[3], corrected[2], "_corrected")
        if alignment is not None:
            alignment.to_csv(folder / "alignment.csv", index=False)
        polarity.to_csv(folder / "polarity.csv")
        if distinguished is not None:
            distinguished.rename_axis("benchmark").to_csv(folder / "distinguishability.csv")
        if matched is not None:
            matched[0].to_csv(folder / "matched_pairs.csv", index=False)
        composite.rename_axis("model").to_csv(folder / "composite.csv")
        figure = plot_factor_selection(solutions, parallel, folder / "factor_selection.png").name
        report = factors_report(abilities=abilities, corrected=corrected, solutions=solutions, parallel=parallel,
                                intervals=intervals, polarity=polarity, settings=settings, figure=figure,
                                alignment=alignment)
        if distinguished is not None:
            report += _distinguish_lines(distinguished, matched)
        (folder / "report.md").write_text(report)
    return Path(out)
