"""The "Fit checks" section of a fit's report: the models and items whose fit statistics are
extreme, and how far the ability order departs from the accuracy order
(:func:`bayesirt.safety.fit_checks.fit_checks`)."""

from __future__ import annotations

import pandas as pd

from bayesirt.report.markdown import markdown_table

__all__ = ["fit_checks_section", "ranking_caution"]


def _person_lines(person: dict) -> list[str]:
    lines = [
        "### Person fit",
        "",
        f"l_z (Drasgow, Levine and Williams 1985) of each model's observed responses at its ability "
        f"({person['evaluated_at']}); about standard normal if the model fits (a little narrower, as the ability "
        f"is estimated), low = a pattern less likely than the model expects at that ability. "
        f"**{person['n_flagged']} of {person['n_models']} models ({person['share_flagged']:.1%})** have "
        f"{person['rule']} (under fit: about 1% or fewer); median l_z {person['median_lz']:.2f}.",
        "",
    ]
    cut = person["cohort_10pct_point"]
    if person["widespread"]:
        lines += [f"**Misfit is widespread in this cohort**: its 10% point of l_z is {cut:.2f}, below the standard "
                  f"normal {person['widespread_below']:.2f} (rule: {person['rule_widespread']}). The cut-off that "
                  "`bayesirt personfit` calibrates on this cohort (its 10% point) is therefore relative: it flags the "
                  "worst tenth of models that the model already fits poorly, not the few that break a model that "
                  "fits the rest.", ""]
    elif cut == cut:  # finite
        lines += [f"The cohort's 10% point of l_z is {cut:.2f} (in a cohort the model fits it lies near or above "
                  f"{person['nominal_quantile']:.2f}): misfit is not widespread by the rule "
                  f"({person['rule_widespread']}).", ""]
    if person["lowest"]:
        shown = pd.DataFrame(person["lowest"])
        lines += [f"Lowest l_z ({len(shown)} shown; ranks: 1 = highest):", "",
                  markdown_table(shown[["model_id", "lz", "theta", "ability_rank", "accuracy", "accuracy_rank"]]), ""]
    return lines


def _item_lines(item: dict) -> list[str]:
    lo, hi = item["mean_square_range"]
    lines = [
        "### Item fit",
        "",
        f"RMSD of each item's characteristic curve at the {item['evaluated_at']} (the item-fit statistic of PISA): "
        "each model is spread over an ability grid by its posterior given its responses, the item's observed "
        "proportion correct at each grid point is compared with the fitted curve, and RMSD is the root mean square "
        "difference weighted by how many models sit there (a difference of proportions; near 0 when the curve fits "
        "and many models answer the item). The noise-corrected RMSD takes out what sampling alone adds on average "
        "under the model, which with about a hundred models per item passes 0.1 by itself. "
        f"**{item['n_flagged']} of {item['n_items']} items ({item['share_flagged']:.1%})** have {item['rule']}: their "
        "curve departs from how the models answer them by more than that noise (wrong shape, or answered against "
        "ability). It is a size threshold, not a test at a stated error rate: where about a hundred models answer "
        "each item, a few percent of items the model fits still pass it. Median RMSD "
        f"{item['median_rmsd']:.3f} (noise-corrected {item['median_rmsd_bc']:.3f}), largest {item['max_rmsd']:.3f} "
        f"({item['max_rmsd_bc']:.3f}).",
        "",
        f"Infit and outfit mean squares at the point abilities (1 in expectation under the model): "
        f"{item['n_mean_square_above']} items above {hi:g} (noisier than the curve) and {item['n_mean_square_below']} "
        f"below {lo:g} (more deterministic), Linacre's range productive for measurement; median infit "
        f"{item['median_infit']:.2f}, outfit {item['median_outfit']:.2f}.",
        "",
    ]
    if item["worst"]:
        lines += [f"Largest noise-corrected RMSD ({len(item['worst'])} shown):", "",
                  markdown_table(pd.DataFrame(item["worst"])), ""]
    return lines


def _rank_lines(ranks: dict) -> list[str]:
    lines = [
        "### Ability order versus accuracy order",
        "",
        f"Spearman correlation of ability ({ranks['evaluated_at']}) and accuracy (share correct of each model's "
        f"observed items) over {ranks['n_models']} models: **{ranks['spearman']:.3f}**. The two ranks (1 = highest) "
        f"differ by {ranks['median_abs_rank_difference']:.0f} places at the median and by up to "
        f"{ranks['max_abs_rank_difference']} places. Abilities weight items by their discrimination, so orders can "
        "differ where the model fits; large differences together with low person fit mean the ability ranks that "
        "model on responses the model does not describe.",
        "",
    ]
    best = ranks["most_accurate"][:5]
    if best:
        lines += ["Most accurate: " + "; ".join(f"`{r['model_id']}` (accuracy {r['accuracy']:.3f}) is ranked "
                                                f"{r['ability_rank']} of {ranks['n_models']} by ability, l_z "
                                                f"{r['lz']:.2f}" for r in best) + ".", ""]
    shown = pd.DataFrame(ranks["largest_rank_differences"])
    if len(shown):
        lines += [f"Largest rank differences ({len(shown)} shown; positive: ranked lower by ability than by "
                  "accuracy):", "",
                  markdown_table(shown[["model_id", "ability_rank", "accuracy_rank", "rank_difference", "theta",
                                        "accuracy", "lz"]]), ""]
    return lines


def fit_checks_section(checks: dict) -> list[str]:
    """Markdown lines of the fit checks (the ``fit_checks`` entry of summary.json)."""
    return (["## Fit checks", "", "Where the fitted model does not describe the data: the models and items with "
             "extreme fit statistics, and where the ability ranking departs from accuracy. All of them are in "
             "`summary.json` (`fit_checks`).", ""]
            + _person_lines(checks["person_fit"]) + _item_lines(checks["item_fit"])
            + _rank_lines(checks["ability_vs_accuracy"]))


def ranking_caution(checks: dict) -> str:
    """One sentence for the top of the ranking: how many models misfit and how far ability and
    accuracy orders agree (see the Fit checks section)."""
    person, ranks = checks["person_fit"], checks["ability_vs_accuracy"]
    text = (f"**Read with the fit checks below**: the model describes {person['n_flagged']} of {person['n_models']} "
            f"models ({person['share_flagged']:.1%}) poorly ({person['rule']}; about 1% under fit); Spearman "
            f"correlation of ability and accuracy {ranks['spearman']:.3f}.")
    if person["widespread"]:
        text += " Misfit is widespread in this cohort, so the ability ranking is a ranking under a model that does not " \
                "describe many of these models."
    return text
