"""The Markdown report of a fit: data, spec and priors, inference settings, diagnostics in plain
language, the model ranking with credible intervals (Wald intervals for a MAP fit) and the most
informative items."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.reading import reading_record, shown_ids
from bayesirt.frequentist.map_output import MAP_COLUMNS
from bayesirt.inference.diagnostics import convergence_table
from bayesirt.models.specs import IRTSpec
from bayesirt.report.paging import MAX_FOREST_ROWS, forest_note

__all__ = ["reading_lines", "fit_report", "markdown_table"]

MAX_RANKED_ROWS = 50
N_INFORMATIVE = 10


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table; floats with 3 significant decimals."""
    def cell(v):
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else f"{v:.3f}"
        return str(v).replace("|", "\\|")

    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def _interval(frame: pd.DataFrame, prefix: str) -> pd.Series:
    lo, hi = [c for c in frame.columns if c.startswith(f"{prefix}_q")][:2]
    return frame.apply(lambda r: f"{r[f'{prefix}_mean']:.2f} [{r[lo]:.2f}, {r[hi]:.2f}]", axis=1)


def _diagnostics_section(tree: xr.DataTree, warnings: list[str], stats: dict | None) -> list[str]:
    settings = json.loads(tree.attrs["bayesirt_settings"])
    lines = ["## Diagnostics", ""]
    if settings["method"] == "map":
        state = "converged" if tree.attrs.get("converged") else "did not converge"
        lines += [f"MAP-EM {state} after {tree.attrs.get('iterations')} iterations (log-likelihood "
                  f"{tree.attrs['loglik']:,.2f}, log prior {tree.attrs['log_prior']:,.2f}). "
                  "There are no draws, so no R-hat, ESS or divergences.", ""]
        return lines + [f"- **Warning.** {w}" for w in warnings] + ([""] if warnings else [])
    if settings["method"] == "nuts":
        table = convergence_table(tree, stats)
        stats = tree["sample_stats"].to_dataset()
        n_div = int(stats["diverging"].sum()) if "diverging" in stats else 0
        lines.append(
            f"Worst R-hat {table['r_hat'].max():.3f}; smallest bulk ESS {table['ess_bulk'].min():.0f}; "
            f"smallest tail ESS {table['ess_tail'].min():.0f}; {n_div} divergent transitions."
        )
        lines.append("")
    if warnings:
        lines += [f"- **Warning.** {w}" for w in warnings]
    else:
        lines.append("All convergence checks passed (R-hat < 1.01, bulk and tail ESS >= 100 per chain, "
                     "no divergences, E-BFMI >= 0.3).")
    return lines + [""]


def fit_report(
    tree: xr.DataTree, spec: IRTSpec, responses: xr.Dataset, items: pd.DataFrame, models: pd.DataFrame,
    warnings: list[str], figures: dict[str, str], *, ci: float, checks: list[str] = (),
    caution: str = "", stats: dict | None = None,
) -> str:
    """Compose the report of one fit. ``figures`` maps captions to file names in the output folder;
    ``checks``: the lines of the fit-checks section, placed after the ranking; ``caution``: a
    sentence opening the ranking section (what the fit checks say about it); ``stats``:
    :func:`~bayesirt.inference.diagnostics.element_diagnostics` of ``tree``, when already computed."""
    settings = json.loads(tree.attrs["bayesirt_settings"])
    timings = json.loads(tree.attrs["bayesirt_timings"])
    y = responses["responses"].values
    observed = y >= 0
    name = responses.attrs.get("name", "responses")
    lines = [
        f"# {spec.title} on {name}",
        "",
        "## Data",
        "",
        f"{y.shape[0]:,} items x {y.shape[1]:,} models; {observed.sum():,} observed responses "
        f"({1 - observed.mean():.1%} missing, excluded from the likelihood); mean accuracy {(y == 1).sum() / observed.sum():.3f}.",
        f"Source: {responses.attrs.get('source', 'in-memory data')}.",
    ]
    if responses.attrs.get("citation"):
        lines.append(f"Attribution: {responses.attrs['citation']}.")
    reading = reading_lines(responses)  # how harness output was read; what was dropped
    lines += ["", *reading[:-1]] if reading else []
    lines += ["", "## Model and priors", "", f"Spec `{spec.name}` ({spec.source}), {spec.parameterization} parameterization:", ""]
    lines += [f"- `{k}` ~ {p.describe()}" for k, p in spec.priors.items()]
    if spec.discrimination_structure == "fixed":
        lines.append(f"- `discrimination` fixed at {spec.discrimination_value:g}")
    elif spec.discrimination_structure == "common":
        lines.append("- one discrimination shared by every item (1PL)")
    lines += ["", "## Inference", ""]
    lines.append(", ".join(f"{k} = {v}" for k, v in settings.items()) + ".")
    if settings["method"] == "map":
        lines.append("A point estimate with standard errors, not a posterior: the item parameters maximize the marginal "
                     "posterior (abilities integrated out), each model's ability maximizes its posterior given them; "
                     "`_sd` columns are standard errors and the intervals Wald intervals (see Files).")
    lines.append("Timings (s): " + ", ".join(f"{k.removesuffix('_s')} {v:.1f}" for k, v in timings.items()) + ".")
    lines.append("")
    lines += _diagnostics_section(tree, warnings, stats)

    ranked = models.head(MAX_RANKED_ROWS)
    is_map = settings["method"] == "map"
    lines += ["## Model ranking", ""] + ([caution, ""] if caution else [])
    if len(models) > MAX_RANKED_ROWS:
        lines += [f"Top {MAX_RANKED_ROWS} of {len(models):,} models (all are in `models.csv`).", ""]
    if is_map:
        lines += [
            f"Ordered by MAP ability given the MAP item parameters; θ with its {ci:.0%} Wald interval (estimate ± "
            "z·SE, items held fixed), not a credible interval. There are no posterior draws, so no rank interval; "
            "P(ahead of next) is a normal approximation: Φ((θ_row − θ_next) / √(SE_row² + SE_next²)), treating the "
            "two abilities as independent normals with their SEs and the items as known (it ignores item "
            "uncertainty, so it overstates certainty somewhat).",
            "",
        ]
        last = ("P(ahead of next)", ranked["prob_ahead_of_next"])
    else:
        rank_lo, rank_hi = [c for c in models.columns if c.startswith("rank_q")][:2]
        lines += [
            f"Ordered by posterior mean ability; θ with its {ci:.0%} credible interval; the rank interval is the "
            f"{ci:.0%} interval of the model's rank across posterior draws (1 = best).",
            "",
        ]
        last = ("rank interval", [f"{a}-{b}" for a, b in zip(ranked[rank_lo], ranked[rank_hi])])
    lines += [
        markdown_table(pd.DataFrame({
            "rank": np.arange(1, len(ranked) + 1),
            "model": ranked["model_id"],
            "family": ranked["family"],
            "θ": _interval(ranked, "theta"),
            last[0]: last[1],
            "accuracy": ranked["accuracy"],
        })),
        "",
        *checks,
        "## Most informative items",
        "",
        "Fisher information averaged over the fitted models' abilities ("
        + ("at the MAP estimates" if is_map else "posterior mean") + "): the items that best separate the models in "
        "this cohort" + (f"; a and b with {ci:.0%} Wald intervals." if is_map else "."),
        "",
    ]
    top = items.sort_values("information", ascending=False, kind="stable").head(N_INFORMATIVE)
    lines += [markdown_table(pd.DataFrame({
        "item": top["item_id"],
        "group": top["item_group"],
        "information": top["information"],
        "a (discrimination)": _interval(top, "discrimination"),
        "b (difficulty)": _interval(top, "difficulty"),
        "proportion correct": top["proportion_correct"],
    })), "", "## Figures", ""]
    lines += [f"![{caption}]({file})" for caption, file in figures.items()]
    lines += ["", forest_note(len(models), "models", "models.csv")] * (len(models) > MAX_FOREST_ROWS)
    lines += ["", "## Files", ""] + (_map_files() if is_map else [
              "- `posterior.nc`: the full ArviZ DataTree (posterior, sample_stats, observed_data, constant_data; "
              "spec text, seed, settings, versions and timings in its attributes); open with `xarray.open_datatree`.",
              "- `items.csv`: one row per item, every parameter in both (a, b) and (a, d) forms.",
              "- `models.csv`: one row per model: ability, rank interval, accuracy.",
              "- `summary.json`: settings, timings, diagnostics, warnings and fit checks, machine-readable.", ""])
    return "\n".join(lines)


def _map_files() -> list[str]:
    """The Files section of a MAP fit, with what each column means there."""
    return ["- `map.nc`: a DataTree with the groups of a sampled fit's `posterior.nc` where they exist "
            "(`posterior`: the MAP estimates stored as one chain of one draw, not posterior draws; `observed_data`, "
            "`constant_data`) and those of `bayesirt mml`'s `mml.nc` (`items`, `abilities` with EAP and MAP and their "
            "SEs, `trace`, `covariance`); open with `xarray.open_datatree`.",
            "- `items.csv`, `models.csv`: the columns and order of a sampled fit's tables; for this MAP fit they mean:",
            *[f"  - `{k}`: {v}" for k, v in MAP_COLUMNS.items()],
            "  - R-hat and ESS columns are absent, as for every single-chain fit (ADVI): there are no draws.",
            "- `summary.json`: settings, timings, the MAP-EM objective and information criteria, warnings, "
            "`columns` (the meanings above) and fit checks.", ""]


def reading_lines(ds: xr.Dataset) -> list[str]:
    """A "## Reading the data" report section (markdown lines); empty when there is nothing to say
    (plain 0/1 data with nothing dropped)."""
    rec = reading_record(ds)
    lines: list[str] = []
    if rec.get("harness"):
        lines += [f"{rec['summary']}.", ""]
        tasks = rec.get("tasks") or {}
        if tasks:
            lines += ["| task | " + " | ".join(sorted({k for v in tasks.values() for k in v})) + " |"]
            keys = sorted({k for v in tasks.values() for k in v})
            lines += ["|" + "---|" * (len(keys) + 1)]
            lines += [f"| {t} | " + " | ".join(str(v.get(k, "")) for k in keys) + " |" for t, v in tasks.items()]
            lines += [""]
        threshold = rec.get("threshold")
        credit = "refused (0/1 scores only)" if threshold in (None, "none") else f"score >= {threshold} is correct"
        lines += [f"Repeated records within a run: aggregate `{rec.get('aggregate', 'none')}`; partial credit: "
                  f"{credit}; damaged output: `{rec.get('on_damaged')}`; reruns: the latest run wins.", ""]
        for item in rec.get("files_skipped") or []:
            lines.append(f"- skipped `{item['path']}`: {item['reason']}")
        for item in rec.get("superseded") or []:
            lines.append(f"- superseded by a later run: `{item['path']}` (by `{item['by']}`)")
        for item in rec.get("unfinished_read") or []:
            lines.append(f"- read {item['scored_samples']} scored samples of the unfinished log `{item['path']}` "
                         f"(status {item['status']})")
        for model, items in (rec.get("errored_samples") or {}).items():
            lines.append(f"- {len(items)} errored or unscored sample(s) of `{model}` left missing: {shown_ids(items)}")
    elif rec.get("threshold") not in (None, "none"):
        lines += [f"Scores >= {rec['threshold']} counted as correct (binarize).", ""]
    if rec.get("orientation"):
        rows = "models" if rec["orientation"]["layout"] == "models-rows" else "items"
        basis = rec["orientation"]["basis"] or "the reader"
        # a guessed layout says so: "guessed by the psychometric convention (...)", not "from guessed: ..."
        how = f"guessed by {basis.removeprefix('guessed: ')}" if basis.startswith("guessed: ") else f"from {basis}"
        lines += [f"- layout: one row per {rows[:-1]} (`{rec['orientation']['layout']}`), {how}; `--orientation` "
                  "sets it"]
    if rec.get("answer_key"):
        lines += [f"- multiple-choice answers scored with the key `{rec['answer_key']}`: 1 where the answer equals "
                  "the item's key, 0 otherwise, missing kept missing"]
    for what, key in (("model(s)", "dropped_models"), ("item(s)", "dropped_items")):
        if rec[key]:
            lines.append(f"- dropped {len(rec[key])} {what} without any observed response: {shown_ids(rec[key])}")
    if not lines:
        return []
    return ["## Reading the data", "", *lines, ""]
