"""Output folders of the SAFE audit jobs: figures, Markdown and the writers of person fit
(l_z distributions), sandbagging detection (l_z by scope, ROC curves, ability shifts and
resolvable gaps) and response fingerprints (self-disagreement null versus cross-model)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display is assumed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import xarray as xr  # noqa: E402

from bayesirt.report.markdown import markdown_table  # noqa: E402
from bayesirt.safety.personfit import misfit_spread  # noqa: E402
from bayesirt.utils.outputs import staged_output, to_json, write_json, write_netcdf

__all__ = ["header", "plot_lz", "plot_roc", "plot_shift", "plot_fingerprint",
           "personfit_section", "sandbag_section", "fingerprint_section", "write_personfit", "write_sandbag",
           "write_suspects", "write_fingerprint"]

_LABEL = {"lz": "$l_z$", "lz_star": "$l_z^*$"}
MAX_ROWS = 50


def header(title: str, responses: xr.Dataset) -> list[str]:
    """Title and one line describing the data."""
    y = responses["responses"].values
    return [f"# {title} on {responses.attrs.get('name', 'responses')}", "",
            f"{y.shape[0]:,} items x {y.shape[1]:,} models; {(y < 0).mean():.1%} missing cells (left out of every "
            "statistic).", ""]


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_lz(values: dict, cutoff: float, path: Path, *, statistic: str = "lz", fpr: float = 0.1) -> Path:
    """Histograms of person-fit values (first entry filled: the genuine cohort) and the cut-off."""
    finite = {k: np.asarray(v, dtype=float)[np.isfinite(v)] for k, v in values.items()}
    pooled = np.concatenate([v for v in finite.values() if v.size])
    bins = np.linspace(np.quantile(pooled, 0.002), np.quantile(pooled, 0.998), 50)
    fig, ax = plt.subplots(figsize=(7, 4))
    for k, (name, v) in enumerate(finite.items()):
        ax.hist(np.clip(v, bins[0], bins[-1]), bins=bins, density=True, histtype="stepfilled" if k == 0 else "step",
                alpha=0.35 if k == 0 else 1.0, lw=1.5, label=f"{name} (n={v.size:,})")
    ax.axvline(cutoff, ls="--", color="k", label=f"cut-off {cutoff:.2f} ({fpr:.0%} false positives)")
    ax.set_xlabel(f"person fit {_LABEL.get(statistic, statistic)} (low = aberrant)")
    ax.set_ylabel("density")
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_roc(roc: pd.DataFrame, detection: pd.DataFrame, path: Path) -> Path:
    """ROC curves of person fit, one panel per scope and one curve per strength; dots mark the
    calibrated cut-off."""
    scopes = list(dict.fromkeys(roc["scope"]))
    fpr0 = float(detection.loc[detection["scope"] == "genuine", "personfit_rate"].iloc[0])
    fig, axes = plt.subplots(1, max(len(scopes), 1), figsize=(4 * max(len(scopes), 1), 4), squeeze=False)
    for ax, scope in zip(axes[0], scopes):
        for k, (strength, curve) in enumerate(roc[roc["scope"] == scope].groupby("strength", sort=True)):
            row = detection[(detection["scope"] == scope) & (detection["strength"] == strength)].iloc[0]
            ax.plot(curve["fpr"], curve["tpr"], color=f"C{k}", label=f"level {strength:g} (AUC {row['auc']:.2f})")
            ax.plot(fpr0, row["personfit_rate"], "o", color=f"C{k}")
        ax.plot([0, 1], [0, 1], ":", color="grey")
        ax.set_title(scope)
        ax.set_xlabel("false-positive rate (genuine)")
        ax.legend(fontsize=7, loc="lower right")
    axes[0][0].set_ylabel("detection rate")
    return _save(fig, path)


def plot_shift(genuine: xr.Dataset, runs: xr.Dataset, gaps: xr.Dataset, path: Path) -> Path:
    """Ability shifts by condition (left) and genuine shifts with the resolvable gap (right)."""
    data, labels = [genuine["shift"].values], ["genuine"]
    for scope in runs["scope"].values:
        for strength in runs["strength"].values:
            run = runs.sel(scope=scope, strength=strength)
            data.append(run["shift"].values[run["changed"].values > 0])
            labels.append(f"{scope} {strength:g}")
    width = max(6.0, 0.42 * len(labels) + 1.5)  # the left panel grows with the conditions, labels stay readable
    fig, (left, right) = plt.subplots(1, 2, figsize=(width + 5.0, 4.5), width_ratios=(width, 5.0))
    left.boxplot([d[np.isfinite(d)] for d in data], showfliers=False)
    left.set_xticks(np.arange(1, len(labels) + 1), labels, fontsize=9, rotation=45, ha="right",
                    rotation_mode="anchor")
    left.tick_params(axis="y", labelsize=9)
    right.tick_params(labelsize=9)
    left.axhline(0, color="grey", lw=0.8)
    left.set_ylabel("ability shift (short test - historical)")
    theta = genuine["theta"].values
    right.plot(theta, genuine["shift"].values, ".", ms=2, alpha=0.4, label="genuine cohort")
    grid = np.linspace(np.nanmin(theta), np.nanmax(theta), 200)
    gap = np.interp(grid, gaps["center"].values, gaps["gap"].values)
    right.plot(grid, gap, "k--", label="resolvable gap")
    right.plot(grid, -gap, "k--")
    right.set_xlabel("historical ability")
    right.set_ylabel("ability shift")
    right.legend(fontsize=8)
    return _save(fig, path)


def plot_fingerprint(null: xr.Dataset, cross: np.ndarray, matches: pd.DataFrame, path: Path, *,
                     alpha: float = 0.05) -> Path:
    """Self-disagreement null versus disagreement between reference identities, with the
    threshold and each query's disagreement with its nearest reference identity."""
    fig, ax = plt.subplots(figsize=(7, 4))
    values = null["value"].values
    top = max(np.nanmax(values), np.nanmax(cross) if cross.size else 0, matches["nearest_disagreement"].max())
    bins = np.linspace(0, top + 1e-9, 50)
    ax.hist(values, bins=bins, density=True, alpha=0.5, label=f"self-disagreement null ({null.attrs['source']})")
    if cross.size:
        ax.hist(cross, bins=bins, density=True, histtype="step", lw=1.5, label="between reference identities")
    pooled = float(np.quantile(values[np.isfinite(values)], 1 - alpha, method="higher"))
    ax.axvline(pooled, ls="--", color="k", label="pooled threshold")
    ax.plot(matches["nearest_disagreement"], np.zeros(len(matches)), "v", color="C3", ms=7, label="queries (nearest)")
    ax.set_xlabel("share of items with different responses")
    ax.set_ylabel("density")
    ax.legend(fontsize=8)
    return _save(fig, path)


def personfit_section(fit: xr.Dataset, cutoff: float, *, statistic: str, fpr: float, figure: str,
                      ppp: xr.Dataset | None = None, spread: dict | None = None) -> list[str]:
    """Markdown of the person-fit job. ``spread``: :func:`bayesirt.safety.personfit.misfit_spread`
    of the cohort the cut-off was calibrated on (said in the report when misfit is widespread)."""
    flagged = fit["flagged"].values
    lines = ["## Person fit", "",
             f"Abilities: {fit.attrs['ability']}. l_z (Drasgow et al. 1985) and l_z* (Snijders 2001, corrected for "
             "the estimated ability) on each model's observed items.", "",
             f"Cut-off on {statistic}: **{cutoff:.3f}**, the {fpr:.0%} point of this cohort (flag {statistic} <= "
             f"cut-off); {int(flagged.sum())} of {flagged.size} models flagged ({flagged.mean():.1%}). The share "
             f"flagged is {fpr:.0%} of the calibration cohort by construction: the cut-off is relative to the cohort.",
             ""]
    if spread is not None:
        lines += [_spread_sentence(spread, cutoff, statistic=statistic, fpr=fpr), ""]
    lines += [f"![Person-fit distribution]({figure})", "", "Lowest person fit:", ""]
    table = fit[["theta", "n_items", "lz", "lz_star"]].to_dataframe().sort_values(statistic).head(20)
    lines += [markdown_table(table.reset_index()), ""]
    if ppp is not None:
        p = ppp["ppp"].values
        lines += ["## Posterior predictive person fit", "",
                  f"{ppp.attrs['draws_used']} posterior draws; ppp = Pr(l_z(replicate) < l_z(observed)), ties half. "
                  f"{np.mean(p < 0.05):.1%} of models have ppp < 0.05 and {np.mean(p < 0.01):.1%} below 0.01 "
                  "(ppp values are conservative under good fit).", ""]
    return lines


def _spread_sentence(spread: dict, cutoff: float, *, statistic: str, fpr: float) -> str:
    share = spread["share_below_nominal_1pct"]
    if spread["widespread"]:
        return (f"**Misfit is widespread in this cohort.** If the 2PL fitted, {statistic} would be roughly standard "
                f"normal (a little narrower, as abilities are estimated) and the cohort's {fpr:.0%} point would lie "
                f"near {spread['nominal_quantile']:.2f}; it lies at {cutoff:.2f}, below the standard normal "
                f"{fpr / 10:.1%} point ({spread['widespread_below']:.2f}), and {share:.1%} of the cohort is below the "
                "standard normal 1% point (-2.33). The model fits a large share of these models poorly, so the "
                f"cut-off is relative: it flags the cohort's worst {fpr:.0%}, not the models that break a model that "
                f"fits the rest (rule: {spread['rule']}).")
    return (f"Misfit is not widespread by the rule ({spread['rule']}): the cohort's {fpr:.0%} point is {cutoff:.2f}; "
            f"{share:.1%} of the cohort is below the standard normal 1% point (-2.33).")


def sandbag_section(detection: pd.DataFrame, settings: dict, figures: dict) -> list[str]:
    """Markdown of the sandbagging job."""
    flip = "correct -> incorrect" if settings["direction"] == "down" else "incorrect -> correct"
    mode = settings.get("mode", "random_errors")
    how = ("mode **ability_shift**: on the in-scope items each model answers as the fitted 2PL says it would at its "
           "ability shifted by the level (logits), drawn conditionally on its genuine response (a coherent shift, as "
           "a model would sandbag)" if mode == "ability_shift" else
           f"mode **prompted**: the same coherent shift plus item-level errors (each in-scope response also changes "
           f"with probability {settings.get('noise') or 0:g}, whatever the item), the mix SAFE's prompted models show"
           if mode == "prompted" else
           "mode **random_errors**: each in-scope response changes independently with probability the level")
    lines = ["## Sandbagging simulation", "",
             f"Every model sandbagged from its genuine responses in each scope and level (`strength`: "
             f"{settings.get('level_unit', 'change probability')}); {how}; direction "
             f"**{settings['direction']}** ({flip}); targeted scope: each model's {settings['target']} item group "
             f"({settings['groups']}); triggered scope: a random {settings['trigger_fraction']:.0%} of the items per "
             "run. Detection is blind: fixed item parameters calibrated on the genuine cohort.", "",
             f"- Person fit: flag {settings['statistic']} <= {settings['cutoff']:.3f} (the {settings['fpr']:.0%} point "
             "of the genuine runs).",
             f"- Ability shift: MAP ability from a {settings['test_length']}-item static test (design "
             f"`{settings.get('static_design', 'max_information')}`) minus the historical (full-data) ability; flagged "
             f"beyond {settings.get('shift_multiplier', 1.0):.2f} times the gap the test resolves at that ability "
             f"(pairs distinguished at {settings['level']:.0%}; the test distinguishes "
             f"{settings['resolved_pairs']:.1%} of cohort pairs).",
             "- Combined: flagged by either (its genuine false-positive rate is the first row).", "",
             *null_lines(settings), "",
             "Rates are over runs that changed at least one response (`runs`).", "",
             markdown_table(detection), ""]
    lines += [f"![{caption}]({name})" for caption, name in figures.items()]
    return lines + [""]


def null_lines(settings: dict) -> list[str]:
    """Where the detectors' false-positive rates come from (:mod:`bayesirt.safety.recollection`)."""
    lines = [f"- **Error rates: {settings.get('null_description', 'in-sample')}.**"]
    crossfit = settings.get("crossfit_fpr") or {}
    if crossfit:
        lines.append(f"- Out-of-sample (cross-fitted) false-positive rates at the stated {settings['fpr']:.0%}: person "
                     f"fit {crossfit['personfit']:.1%}, shift {crossfit['shift']:.1%}, either "
                     f"{crossfit['combined']:.1%}.")
    return lines


def fingerprint_section(matches: pd.DataFrame, null: xr.Dataset, alpha: float, figure: str) -> list[str]:
    """Markdown of the fingerprint job."""
    v = null["value"].values
    counts = matches["verdict"].value_counts().to_dict()
    return ["## Response fingerprints", "",
            f"Self-disagreement null from **{null.attrs['source']}** ({v.size:,} comparisons; median "
            f"{np.median(v):.1%}, {1 - alpha:.0%} quantile "
            f"{np.quantile(v[np.isfinite(v)], 1 - alpha, method='higher'):.1%}). "
            f"{int((matches['threshold_source'] == 'identity').sum())} of {len(matches)} queries are judged against "
            "their identity's own null (an identity with at least 1 / alpha self-disagreements), the others against "
            "this pooled one (column `threshold`)."
            + (" **The resampling null was requested** (`null=\"resampling\"`): it treats all IRT residual variation "
               "as noise, so it is far wider than real repeated collections (SAFE's endpoints: 2.0-2.8%) and only "
               "gross changes exceed it; calibrate with repeated collections (SAFE App. B)."
               if null.attrs["source"] == "resampling" else ""), "",
            "Verdicts: " + ", ".join(f"{k} {n}" for k, n in counts.items()) + ".", "",
            *([f"First {MAX_ROWS} of {len(matches)} queries (all in `matches.csv`):", ""] if len(matches) > MAX_ROWS
              else []), markdown_table(matches.head(MAX_ROWS)), "", f"![Fingerprint null]({figure})", ""]


def _warnings(messages: list[str]) -> list[str]:
    return ["## Warnings", "", *[f"- {m}" for m in messages], ""] if messages else []


def write_personfit(fit: xr.Dataset, items: xr.Dataset, responses: xr.Dataset, out, *, ppp: xr.Dataset | None,
                    warnings: list[str], force: bool, genuine: xr.Dataset | None = None) -> Path:
    """Write the person-fit folder: personfit.nc, models.csv, items.csv, summary.json, report.md, lz.png.
    ``genuine``: the separate reference cohort's person fit (scoring against ``--reference``)."""
    a = fit.attrs
    cohort = fit if genuine is None else genuine
    spread = misfit_spread(cohort[a["statistic"]].values, a["cutoff"], fpr=a["fpr"])
    summary = {k: a[k] for k in ("fpr", "statistic", "cutoff", "calibration")} | {
        "flagged": int(fit["flagged"].sum()), "models": fit.sizes["model"], "misfit_spread": spread,
        "warnings": warnings}
    if genuine is not None:
        summary |= {"reference": a["reference"], "reference_models": a["reference_models"], "items_scored": items.sizes["item"]}
    with staged_output(out, force=force) as folder:
        write_netcdf(xr.DataTree.from_dict({"models": fit, "items": items}
                                           | ({} if genuine is None else {"reference": genuine})),
                     folder / "personfit.nc")
        fit.to_dataframe().reset_index().to_csv(folder / "models.csv", index=False)
        items.to_dataframe().reset_index().to_csv(folder / "items.csv", index=False)
        write_json(folder / "summary.json", summary)
        cohorts = ({"genuine cohort": fit[a["statistic"]].values} if genuine is None else
                   {"reference cohort": genuine[a["statistic"]].values, "scored runs": fit[a["statistic"]].values})
        figure = plot_lz(cohorts, a["cutoff"], folder / "lz.png", statistic=a["statistic"], fpr=a["fpr"]).name
        scoring = [] if genuine is None else [
            f"Scored against the reference cohort {a['reference']} ({a['reference_models']} models): items calibrated "
            f"there, and the cut-off is its {a['fpr']:.0%} quantile of {a['statistic']} on the "
            f"{items.sizes['item']} items these runs answered; {int(fit['flagged'].sum())} of "
            f"{fit.sizes['model']} runs flagged.", ""]
        lines = header("Person fit", responses) + scoring + personfit_section(
            fit, a["cutoff"], statistic=a["statistic"], fpr=a["fpr"], figure=figure, ppp=ppp, spread=spread) + _warnings(warnings)
        (folder / "report.md").write_text("\n".join(lines))
    return Path(out)


def write_sandbag(result, responses: xr.Dataset, out, *, warnings: list[str], force: bool) -> Path:
    """Write the sandbagging folder: sandbagging.nc, detection.csv, roc.csv, gaps.csv, genuine.csv,
    summary.json, report.md and the figures lz.png, roc.png, shift.png."""
    st = result.settings
    with staged_output(out, force=force) as folder:
        tree = xr.DataTree.from_dict({"genuine": result.genuine, "runs": result.runs, "gaps": result.gaps,
                                      "items": result.items})
        tree.attrs = {"settings": to_json(st, indent=None)}
        write_netcdf(tree, folder / "sandbagging.nc")
        result.detection.to_csv(folder / "detection.csv", index=False)
        result.roc.to_csv(folder / "roc.csv", index=False)
        result.gaps.to_dataframe().reset_index().to_csv(folder / "gaps.csv", index=False)
        result.genuine.to_dataframe().reset_index().to_csv(folder / "genuine.csv", index=False)
        write_json(folder / "summary.json", {"settings": st, "detection": result.detection.to_dict("records"),
                                             "warnings": warnings})
        runs, top = result.runs, result.runs["strength"].values.max()
        values = {"genuine": result.genuine[st["statistic"]].values}
        for scope in runs["scope"].values:
            run = runs.sel(scope=scope, strength=top)
            values[f"{scope} (level {top:g})"] = run[st["statistic"]].values[run["changed"].values > 0]
        figures = {"Person-fit distributions": plot_lz(values, st["cutoff"], folder / "lz.png",
                                                       statistic=st["statistic"], fpr=st["fpr"]).name,
                   "ROC curves": plot_roc(result.roc, result.detection, folder / "roc.png").name,
                   "Ability shifts": plot_shift(result.genuine, runs, result.gaps, folder / "shift.png").name}
        lines = header("Sandbagging detection", responses) + sandbag_section(result.detection, st, figures)
        (folder / "report.md").write_text("\n".join(lines + _warnings(warnings)))
    return Path(out)


def _shift_items(st: dict) -> str:
    n, total = st.get("shift_items", st["test_items"]), st["test_items"]
    if n >= total:
        return f"all {total} items (no more than the shift test's length)"
    return f"a {n}-item static test among them (design `{st.get('static_design')}`; items in summary.json)"


def write_suspects(suspects: xr.Dataset, genuine: xr.Dataset, settings: dict, out, *, warnings: list[str],
                   force: bool, roc=None) -> Path:
    """Write the folder of suspect runs scored against a reference cohort (``sandbag --reference``):
    suspects.nc (DataTree: suspects, reference), suspects.csv, genuine.csv, summary.json, report.md;
    with ``roc`` (:func:`bayesirt.safety.sandbagging.labelled_roc`) also auc_labelled.csv and
    roc_labelled.csv."""
    st = settings
    rates = {k: float(genuine[f"flag_{k}"].mean()) for k in ("personfit", "shift", "combined")}
    flagged = {k: int(suspects[f"flag_{k}"].sum()) for k in ("personfit", "shift", "combined")}
    table = suspects.to_dataframe().reset_index()
    columns = ["model", "theta_test", "theta_test_se", "theta", "shift", "gap", st["statistic"], "flag_personfit",
               "flag_shift", "flag_combined"]
    with staged_output(out, force=force) as folder:
        tree = xr.DataTree.from_dict({"suspects": suspects, "reference": genuine})
        tree.attrs = {"settings": to_json(st, indent=None)}
        write_netcdf(tree, folder / "suspects.nc")
        table.to_csv(folder / "suspects.csv", index=False)
        genuine.to_dataframe().reset_index().to_csv(folder / "genuine.csv", index=False)
        labelled = []
        if roc is not None:
            auc, curves, negatives = roc
            auc.to_csv(folder / "auc_labelled.csv", index=False)
            curves.to_csv(folder / "roc_labelled.csv", index=False)
            labelled = ["## ROC of the detectors on the labelled runs (SAFE Figure 6A)", "",
                        f"Positives: runs labelled sandbag; negatives: {negatives}. Person fit is scored by "
                        f"{st['statistic']} (low = suspicious), the ability shift by |shift| / resolvable gap; `tpr` and "
                        "`fpr` are the flag rates at the operating point above (combined: flagged by either). Curves in "
                        "roc_labelled.csv.", "", markdown_table(auc.round(3)), ""]
        write_json(folder / "summary.json", {"settings": st, "flagged": flagged, "genuine_flag_rates": rates,
                                             "suspects": suspects.sizes["model"], "warnings": warnings}
                   | ({"labelled": roc[0].to_dict("records")} if roc is not None else {}))
        lines = ["# Suspect runs scored against a reference cohort", "",
                 f"Reference cohort {st['reference']}: {st['reference_models']} models, {st['reference_items']} items, "
                 f"calibrated by the regularized 2PL (MAP-EM). The suspects' {st['test_items']} items are their test; "
                 f"as SAFE, the two detectors read separate item sets.", "",
                 f"- Person fit: {st['statistic']} on all {st.get('personfit_items', st['test_items'])} items, flagged "
                 f"at or below {st['cutoff']:.3f}, the "
                 f"{st['fpr']:.0%} quantile of the reference cohort's genuine runs on the same items.",
                 f"- Ability shift: the ability from {_shift_items(st)} minus the historical ability (the same model's "
                 f"full-data ability in the reference; {st['suspects_with_history']} of {suspects.sizes['model']} "
                 f"suspects have one), flagged beyond {st.get('shift_multiplier', 1.0):.2f} times the gap the test "
                 f"resolves at {st['level']:.0%}.",
                 f"- Flag rates of the reference cohort's genuine runs (calibration sample): person fit "
                 f"{rates['personfit']:.1%}, shift {rates['shift']:.1%}, either {rates['combined']:.1%}.",
                 *null_lines(st), "",
                 f"Flagged: person fit {flagged['personfit']}, shift {flagged['shift']}, either {flagged['combined']} "
                 f"of {suspects.sizes['model']} runs.", "",
                 markdown_table(table[[c for c in columns if c in table]].round(3)), "", *labelled]
        (folder / "report.md").write_text("\n".join(lines + _warnings(warnings)))
    return Path(out)


def write_fingerprint(table: xr.Dataset, null: xr.Dataset, matches: pd.DataFrame, cross: np.ndarray,
                      reference: xr.Dataset, out, *, alpha: float, warnings: list[str], force: bool) -> Path:
    """Write the fingerprint folder: fingerprint.nc, matches.csv, disagreement.csv, null.csv,
    summary.json, report.md, fingerprint.png."""
    with staged_output(out, force=force) as folder:
        match_ds = xr.Dataset.from_dataframe(matches.set_index("query"))
        write_netcdf(xr.DataTree.from_dict({"disagreement": table, "null": null, "matches": match_ds}),
                     folder / "fingerprint.nc")
        matches.to_csv(folder / "matches.csv", index=False)
        table["disagreement"].to_pandas().to_csv(folder / "disagreement.csv")
        null.to_dataframe().to_csv(folder / "null.csv", index=False)
        write_json(folder / "summary.json", {"alpha": alpha, "null_source": null.attrs["source"],
                                             "threshold_pooled": float(np.quantile(
                                                 null["value"].values[np.isfinite(null["value"].values)], 1 - alpha,
                                                 method="higher")),
                                             "judged_by_own_null": int((matches["threshold_source"] == "identity").sum()),
                                             "verdicts": matches["verdict"].value_counts().to_dict(),
                                             "shared_items": table.attrs["items"], "warnings": warnings})
        figure = plot_fingerprint(null, cross, matches, folder / "fingerprint.png", alpha=alpha).name
        lines = header("Response fingerprints", reference) + fingerprint_section(matches, null, alpha, figure)
        (folder / "report.md").write_text("\n".join(lines + _warnings(warnings)))
    return Path(out)
