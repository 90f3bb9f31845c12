"""Output folders of ``bayesirt select`` (a short test from a bank) and ``bayesirt score`` (full-benchmark
accuracy from a partial run)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import xarray as xr  # noqa: E402

from bayesirt.report.markdown import markdown_table  # noqa: E402
from bayesirt.report.paging import MAX_FOREST_ROWS, forest_note, forest_rows  # noqa: E402
from bayesirt.utils.outputs import staged_output, write_netcdf  # noqa: E402

__all__ = ["write_selection", "write_scores", "plot_scores", "SCORE_COLUMNS"]

#: The leading columns of scores.csv, in order (scripts rely on them).
SCORE_COLUMNS = ("model", "n_items", "predicted_accuracy", "lower", "upper", "person_fit_flag")


def _json(path: Path, payload: dict) -> None:
    path.write_text(json.dumps(payload, indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v)) + "\n")


def _bank_lines(bank: dict) -> list[str]:
    lo, hi = bank["ability_range"]
    lines = [f"Bank: `{bank['source']}`, {bank['n_items']} items, {bank['n_draws']} item-parameter draws "
             f"({bank['kind']}); calibrated on {bank['n_calibration_models']} models with abilities "
             f"{lo:.2f} to {hi:.2f} (population {bank['population']}).", ""]
    return lines + [f"- {n}" for n in bank["notes"]] + ([""] if bank["notes"] else [])


def _notes(summary: dict) -> list[str]:
    """The notes on how the output was made (fallbacks, rescaling, widening) as a Markdown section."""
    if not summary.get("notes"):
        return []
    return ["## How these numbers were made", "", *[f"- {n}" for n in summary["notes"]], ""]


def write_selection(out, table: pd.DataFrame, harness: dict | None, summary: dict, *, force: bool) -> Path:
    """``test_items.csv`` (``item_id`` first), ``lm_eval_samples.json`` and ``inspect_sample_ids.json``
    (``task -> ids``, when the ids map to harness tasks), ``summary.json`` and ``report.md``."""
    with staged_output(out, force=force) as folder:
        table.to_csv(folder / "test_items.csv", index=False)
        lines = [f"# Short test: {len(table)} of {summary['bank']['n_items']} items", ""]
        lines += _bank_lines(summary["bank"])
        lines += [f"Selection: {summary['selection_text']}.", ""]
        lines += _notes(summary)
        if harness is not None:
            _json(folder / "lm_eval_samples.json", harness)
            _json(folder / "inspect_sample_ids.json", harness)
            tasks = ",".join(harness)
            lines += ["## Running the test", "",
                      f"lm-evaluation-harness (tasks {tasks}): `lm_eval --model ... --tasks {tasks} --samples "
                      "lm_eval_samples.json --log_samples --output_path RUN`, then `bayesirt score BANK RUN --out DIR`.",
                      "", "Inspect AI (one run per task; `inspect_sample_ids.json` holds the same lists):", "",
                      *[f"- {t}: `inspect eval <{t} task> --sample-id {','.join(map(str, ids))} --log-dir RUN`"
                        for t, ids in harness.items()], "",
                      f"Item ids map to (task, document) by: {summary['harness_rule']}", ""]
        else:
            lines += ["## Running the test", "", f"No harness subset files: {summary['harness_note']}", ""]
        shown = table.copy()
        for col in ("discrimination", "intercept", "difficulty"):
            shown[col] = shown[col].map(lambda v: f"{v:.2f}")
        lines += ["## Items", "", markdown_table(shown), ""]
        _json(folder / "summary.json", summary)
        (folder / "report.md").write_text("\n".join(lines))
    return Path(out)


def plot_scores(scores: xr.Dataset, path: Path, *, level: float) -> Path:
    """Predicted accuracy with its interval per model, highest at the top; above ``MAX_FOREST_ROWS``
    models, evenly spaced ranks (the title says so; every model is in scores.csv)."""
    n = scores.sizes["model"]
    ranked = np.argsort(scores["predicted_accuracy"].values, kind="stable")
    order = ranked[forest_rows(n)]
    fig, ax = plt.subplots(figsize=(6, 1.0 + 0.22 * order.size))
    if order.size < n:
        ax.set_title(f"{order.size} of {n:,} models, at evenly spaced ranks (all in scores.csv)", fontsize=8)
    pos = np.arange(order.size)
    pred = scores["predicted_accuracy"].values[order]
    lo, hi = scores["lower"].values[order], scores["upper"].values[order]
    bad = (scores["person_fit_flag"].values | scores["outside_range"].values)[order]
    ax.errorbar(pred[~bad], pos[~bad], xerr=[pred[~bad] - lo[~bad], hi[~bad] - pred[~bad]], fmt="o", ms=3,
                label="interval")
    if bad.any():
        ax.errorbar(pred[bad], pos[bad], xerr=[pred[bad] - lo[bad], hi[bad] - pred[bad]], fmt="x", ms=4,
                    color="tab:red", label="flagged / outside range: not trusted")
    ax.set_yticks(pos, [str(m)[:40] for m in scores["model"].values[order]], fontsize=6)
    ax.set(xlabel=f"predicted full-benchmark accuracy ({level:.0%} interval)", xlim=(0, 1))
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_scores(out, scores: xr.Dataset, summary: dict, *, force: bool) -> Path:
    """``scores.csv`` (:data:`SCORE_COLUMNS` first), ``scores.nc``, ``summary.json``, ``report.md`` and
    ``scores.png``."""
    frame = scores.to_dataframe().reset_index()
    frame = frame[list(SCORE_COLUMNS) + [c for c in frame.columns if c not in SCORE_COLUMNS]]
    with staged_output(out, force=force) as folder:
        frame.to_csv(folder / "scores.csv", index=False)
        write_netcdf(scores, folder / "scores.nc")
        level = summary["level"]
        figure = plot_scores(scores, folder / "scores.png", level=level).name
        lines = [f"# Full-benchmark accuracy from partial runs: {scores.sizes['model']} model(s)", ""]
        lines += _bank_lines(summary["bank"])
        how = (f"The predicted accuracy over all {summary['bank']['n_items']} bank items is the model-assisted "
               f"estimate of a stratified random sample of them, with a {level:.0%} design-based interval"
               if summary["interval"] == "design" else
               f"Each model's ability posterior integrates over the bank's item draws (mixed by the marginal "
               f"likelihood of its answers); the predicted accuracy over all {summary['bank']['n_items']} bank "
               f"items is its observed answers plus the posterior predictive of the items it did not run, with a "
               f"{level:.0%} interval from {summary['samples']} predictive draws")
        lines += [how + ". Interval used: "
                  f"**{summary['interval']}**, {summary['interval_text']}"
                  + (f"; for the {summary.get('at_edge', summary['extrapolated'])} model(s) outside or at the edge of "
                     f"the bank's support (column `at_edge`) it is {summary.get('interval_at_edge', 'widened')} "
                     f"({summary['extrapolated']} widened, column `extrapolated`)" if summary["extrapolated"] else "")
                  + ". The interval is for the model's proportion correct over all the bank's items. "
                  "Person fit: l_z on the observed items against the "
                  f"{summary['fpr']:.0%} cut-off of the calibration cohort on the same items "
                  f"({summary['cutoff_method']}); a flagged pattern is not explained by the bank and its interval is "
                  "not trusted. 'outside': the model lies outside the abilities the bank was calibrated on; its "
                  "interval rests on extrapolation (widened unless `--extrapolation none`): check it with items near "
                  "its ability.", ""]
        lines += _notes(summary)
        table = pd.DataFrame({
            "model": frame["model"], "items run": frame["n_items"], "correct": frame["n_correct"],
            "predicted accuracy": frame["predicted_accuracy"].map(lambda v: f"{v:.3f}"),
            f"{level:.0%} interval": [f"[{a:.3f}, {b:.3f}]" for a, b in zip(frame["lower"], frame["upper"], strict=True)],
            "ability": [f"{m:.2f} ± {s:.2f}" for m, s in zip(frame["theta_mean"], frame["theta_sd"], strict=True)],
            "l_z (cut-off)": [f"{z:.2f} ({c:.2f})" if np.isfinite(z) else "—"
                              for z, c in zip(frame["lz"], frame["lz_cutoff"], strict=True)],
            "flags": [", ".join(f for f, on in (("person misfit", p), ("outside calibrated range", o),
                                                ("interval widened (extrapolation)", e),
                                                ("at the test's ceiling / floor", c)) if on) or "—"
                      for p, o, e, c in zip(frame["person_fit_flag"], frame["outside_range"], frame["extrapolated"],
                                            frame["at_ceiling"], strict=True)]})
        lines += ["## Models", "", markdown_table(table), "", f"![predicted accuracy]({figure})", ""]
        n_models = scores.sizes["model"]
        lines += [forest_note(n_models, "models", "scores.csv"), ""] * (n_models > MAX_FOREST_ROWS)
        if summary["warnings"]:
            lines += ["## Warnings", "", *[f"- {w}" for w in summary["warnings"]], ""]
        _json(folder / "summary.json", summary)
        (folder / "report.md").write_text("\n".join(lines))
    return Path(out)
