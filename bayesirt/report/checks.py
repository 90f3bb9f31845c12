"""Reports of the frequentist reference checks: MML fit, PL ladder, Bayes-versus-MML agreement
and split-half retention (Markdown sections and PNG figures)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import xarray as xr  # noqa: E402

from bayesirt.frequentist import Agreement, MMLResult  # noqa: E402
from bayesirt.report.markdown import markdown_table  # noqa: E402

__all__ = ["mml_section", "ladder_section", "agreement_section", "splithalf_section", "plot_agreement",
           "plot_splithalf"]

MAX_FLAGGED_ROWS = 30
MAX_ESTIMATE_ROWS = 50
_FLAG_COLOURS = {"": "C0", "prior": "C1", "unexplained": "C3"}


def mml_section(fit: MMLResult, summary: dict) -> list[str]:
    nodes = fit.attrs.get("quadrature", "?")
    if fit.attrs.get("priors"):
        lines = [
            "## Marginal MAP of the item parameters (MAP-EM)", "",
            f"Spec `{fit.spec.name}`: the mode of the marginal posterior of the item parameters under the spec's priors "
            f"({fit.attrs.get('active_priors', '?')}), abilities integrated out over their "
            f"{fit.attrs.get('population', 'population')} distribution on {nodes} Gauss-Hermite nodes (Bock-Aitkin "
            "EM with the item priors, MAP-EM; not a joint mode over abilities and items). Point estimates with "
            "standard errors, not credible intervals.",
        ]
    else:
        lines = [
            "## Marginal maximum likelihood", "",
            f"Spec `{fit.spec.name}` fitted by Bock-Aitkin EM (marginal maximum likelihood), {nodes} Gauss-Hermite nodes.",
        ]
    lines.append(f"Log-likelihood {summary['loglik']:.4f}; {summary['n_parameters']} parameters; AIC {summary['aic']:.2f}; "
                 f"BIC {summary['bic']:.2f} (n = {summary['n_models']} models); {summary['iterations']} EM iterations; "
                 f"{'converged' if summary['converged'] else '**not converged**'}.")
    if fit.attrs.get("map_asymptotes") and not fit.attrs.get("priors"):
        lines.append("The asymptotes carry the spec's Beta priors even without `--priors` (as SAFE App. E), so this fit is MAP for them.")
    return lines + [""] + _estimate_section(fit)


def _estimate_section(fit: MMLResult) -> list[str]:
    """The item estimates with their standard errors (at most :data:`MAX_ESTIMATE_ROWS` items)."""
    names = ["discrimination", "difficulty"] + [n for n, has in (("guessing", fit.spec.has_guessing),
                                                                 ("slip", fit.spec.has_slip)) if has]
    items = fit.items
    table = pd.DataFrame({"item": items["item"].values})
    for name in names:
        table[f"{name} estimate"] = items[name].values
        table[f"{name} SE"] = items[f"{name}_se"].values
    se = (f"SE: square root of the diagonal of the {fit.attrs.get('se_method', 'inverse observed information')}."
          if fit.covariance is not None else "SE: not computed (`--no-se`).")
    lines = ["## Item estimates", "", f"Estimate and standard error of each item parameter. {se} "
             "Abilities given these items are in `models.csv`: EAP (`eap`, `eap_sd`) and MAP (`map`, `map_se`).", ""]
    if len(table) > MAX_ESTIMATE_ROWS:
        lines += [f"The first {MAX_ESTIMATE_ROWS} of {len(table):,} items; all are in `items.csv`.", ""]
    return lines + [markdown_table(table.head(MAX_ESTIMATE_ROWS)), ""]


def ladder_section(table: pd.DataFrame, lrt: pd.DataFrame) -> list[str]:
    best_aic, best_bic = table.loc[table["aic"].idxmin(), "model"], table.loc[table["bic"].idxmin(), "model"]
    return [
        "## PL model ladder (SAFE App. E)", "",
        f"n for BIC = {table.attrs.get('n', '?')} models. Lowest AIC: **{best_aic}**; lowest BIC: **{best_bic}**.", "",
        markdown_table(table), "",
        "Likelihood-ratio tests of adjacent rungs:", "",
        markdown_table(lrt[["comparison", "statistic", "df", "p", "note"]]), "",
    ]


def agreement_section(agreement: Agreement, figure: str | None = None) -> list[str]:
    k = agreement.threshold_sd
    lines = [
        "## Bayes versus MML agreement", "",
        "Posterior means compared with the marginal ML estimates and with MAP-EM under the same priors "
        "(abilities: EAP under the ML and MAP-EM item estimates). Flags: **unexplained** when |mean - MAP| "
        "exceeds sqrt(3) posterior sd + 3 MCSE (more than the mean-mode gap of a unimodal posterior plus "
        f"Monte Carlo error); **prior** when |MAP - ML| exceeds {k:g} x sqrt(sd^2 + se_ML^2) (the prior, not the "
        "data, sets the value). Difficulties are compared in slope-intercept form.", "",
        markdown_table(agreement.summary), "",
    ]
    flagged = agreement.flagged
    if flagged.empty:
        lines.append("No parameter is flagged: every difference is within what posterior sd, Monte Carlo error and prior shrinkage explain.")
    else:
        counts = flagged["flag"].value_counts().to_dict()
        lines += [f"Flagged: {', '.join(f'{v} {k}' for k, v in counts.items())} (all in `agreement.csv`)"
                  + (f"; the {MAX_FLAGGED_ROWS} largest:" if len(flagged) > MAX_FLAGGED_ROWS else ":"), "",
                  markdown_table(flagged.head(MAX_FLAGGED_ROWS)[
                      ["parameter", "element", "posterior_mean", "posterior_sd", "ml", "map", "diff_ml_sd", "shrinkage_z", "flag"]])]
    if figure:
        lines += ["", f"![Posterior mean against the ML estimate]({figure})"]
    return lines + [""]


def splithalf_section(ds: xr.Dataset, figure: str | None = None) -> list[str]:
    frame = ds["retention"].to_pandas()
    mean, lo, hi = frame.mean(), frame.quantile(0.025), frame.quantile(0.975)
    med1, med2 = ds["median_half1"].mean("split"), ds["median_half2"].mean("split")
    rows = pd.DataFrame({
        "fit": ["without priors (ML)", "with priors (MAP-EM)"],
        "mean retention": [mean["ml"], mean["map"]],
        "median retention": [frame["ml"].median(), frame["map"].median()],
        "2.5%-97.5% over splits": [f"{lo['ml']:.2f}-{hi['ml']:.2f}", f"{lo['map']:.2f}-{hi['map']:.2f}"],
        "median slope, half 1": [float(med1.sel(fit="ml")), float(med1.sel(fit="map"))],
        "median slope, half 2": [float(med2.sel(fit="ml")), float(med2.sel(fit="map"))],
        "fit warnings": [int(ds["warnings"].sel(fit="ml").sum()), int(ds["warnings"].sel(fit="map").sum())],
    })
    lines = [
        "## Split-half retention of discrimination (SAFE)", "",
        f"{ds.attrs['splits']} random splits of the {ds.attrs['n_models']} models into halves (seed {ds.attrs['seed']}); "
        f"spec `{ds.attrs['spec']}`. For the {ds.attrs['top']} most discriminating items of half one, retention = "
        "sum of their half-two slopes / sum of their half-one slopes. Fit warnings count slopes that ran to their "
        "bound or an EM iteration cap.", "",
        markdown_table(rows), "",
    ]
    if figure:
        lines += [f"![Retention per split]({figure})", ""]
    return lines


def plot_agreement(agreement: Agreement, path: Path) -> Path:
    """One panel per parameter: posterior mean (with +/- 1 sd when few points) against the ML
    estimate, the identity line, flagged elements coloured and the worst labelled."""
    el = agreement.elements
    names = list(dict.fromkeys(el["parameter"]))
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 4.2), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        g = el[el["parameter"] == name]
        for flag, colour in _FLAG_COLOURS.items():
            h = g[g["flag"] == flag]
            if h.empty:
                continue
            label = flag or "agrees"
            if len(g) <= 200:
                ax.errorbar(h["ml"], h["posterior_mean"], yerr=h["posterior_sd"], fmt="o", ms=3, color=colour,
                            elinewidth=0.6, alpha=0.8, label=label)
            else:
                ax.plot(h["ml"], h["posterior_mean"], "o", ms=2, color=colour, alpha=0.6, label=label)
        worst = g[g["flag"] != ""]
        for row in worst.reindex(worst["diff_ml_sd"].abs().sort_values(ascending=False).index).head(5).itertuples():
            ax.annotate(row.element, (row.ml, row.posterior_mean), fontsize=6, xytext=(3, 3), textcoords="offset points")
        lim = [np.nanmin(g[["ml", "posterior_mean"]].values), np.nanmax(g[["ml", "posterior_mean"]].values)]
        ax.plot(lim, lim, color="0.5", lw=0.8, ls="--")
        ax.set_xlabel(f"{name}: ML estimate")
        ax.set_ylabel(f"{name}: posterior mean")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_splithalf(ds: xr.Dataset, path: Path) -> Path:
    """Retention per split, without and with priors."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    labels = {"ml": "without priors (ML)", "map": "with priors (MAP-EM)"}
    for i, fit in enumerate(ds["fit"].values):
        r = ds["retention"].sel(fit=fit).values
        ax.plot(np.full(r.size, i) + np.linspace(-0.12, 0.12, r.size), r, "o", color=f"C{i}", alpha=0.8)
        ax.hlines(r.mean(), i - 0.25, i + 0.25, color=f"C{i}", lw=2)
    ax.axhline(1.0, color="0.5", lw=0.8, ls="--")
    ax.set_xticks(range(ds.sizes["fit"]), [labels.get(f, f) for f in ds["fit"].values])
    ax.set_ylabel(f"retention of top-{ds.attrs['top']} discrimination")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
