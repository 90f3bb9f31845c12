"""``bayesirt audit``: read the data, run the primary audit, write its folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bayesirt.audit.engine.result import AuditConfig
from bayesirt.data.settings import DATA_HELP
from bayesirt.utils.options import comma_list, declare, option
from bayesirt.utils.outputs import check_output, staged_output, write_json

if TYPE_CHECKING:  # annotations only
    import xarray as xr

__all__ = ["run_audit_job", "run_common_models_job", "run_content_audit_job", "FAMILY_SOURCES"]

FAMILY_SOURCES = ("supplied", "derived from model ids")
"""Values of ``summary["family_source"]``: where the audited family labels came from."""


def _with_family_source(responses: xr.Dataset, derive_families: bool) -> tuple[xr.Dataset, str]:
    """The Dataset the audit runs on and where its family labels come from.

    With ``derive_families`` the family labels are replaced by the NT C.1 rule on the model ids.
    Otherwise they are kept as they are; they count as "derived from model ids" when they equal
    that rule's labels (data without family labels get exactly those from
    :func:`~bayesirt.data.make_responses`), and as "supplied" otherwise.
    """
    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.data.families import derive_family

    derived = derive_family(responses["model_id"].values.astype(str))
    if derive_families:
        return responses.assign_coords(family=("model", derived)), FAMILY_SOURCES[1]
    same = bool((responses["family"].values.astype(str) == derived).all())
    return responses, FAMILY_SOURCES[1] if same else FAMILY_SOURCES[0]


@declare(expand={"config": AuditConfig}, positional={"data": DATA_HELP})
def run_audit_job(data, out, *,
                  models_csv=option(None, "CSV of model labels: model_id and family and/or owner (replaces derived "
                                          "ones)", type=str, flag="--models", metavar="CSV"),
                  items_csv=option(None, "CSV of item labels: item_id and item_group and/or testlet (blank: "
                                         "the item stands alone)", type=str, flag="--items",
                                   metavar="CSV"),
                  config: AuditConfig | None = None,
                  derive_families: bool = option(False, "replace the data's family labels by the NT C.1 rule on the "
                                                        "model ids (Qwen, Llama, Gemma, Mistral/Mixtral, Phi) first"),
                  matched: bool = option(False, "add the discrimination- and reliability-matched controls (NT B.2)"),
                  perturbations: bool = option(False, "add the population perturbations (owner caps 1 and 3, "
                                                      "lexicographic, lineage, omit a family)"),
                  profiles: bool = option(False, "add the capability-profile matching diagnostic (NT App. G)"),
                  workers: int | None = option(1, "worker processes for the controls and bootstraps: 1 runs them in "
                                                  "this process, N > 1 starts a local cluster of N", type=int, low=1),
                  scheduler: str | None = option(None, "address of an existing Dask scheduler (instead of local "
                                                       "workers)", type=str,
                                                 toml="a running scheduler's address belongs to one session"),
                  force: bool = False, progress: bool = True) -> Path:
    """Run the primary audit on ``data`` (a path, dataset name or response Dataset) and write
    ``out``: audit.nc, summary.json, report.md, controls.png and the per-fold CSV tables.

    ``models_csv`` (``model_id`` + ``family``/``owner``) and ``items_csv`` (``item_id`` +
    ``item_group``/``testlet``) replace the labels derived from the ids or read with the data. Family labels
    are used as given; ``config.families`` (None: every label but "other" and "ambiguous")
    chooses the audited ones. ``derive_families`` replaces the family labels (of the data and of
    ``models_csv``) by the NT C.1 rule on the model ids
    (:func:`bayesirt.data.families.derive_family`) before the audit; ``summary["family_source"]``
    records which ("supplied" or "derived from model ids"). The
    item-signature replication always runs (it is cheap); ``matched`` adds the discrimination-
    and reliability-matched controls, ``perturbations`` the population reruns, ``profiles`` the
    capability-profile matching
    (:func:`bayesirt.audit.robustness.add_diagnostics`). With the Bayesian layer (``config.bayes``)
    the signatures and the matched controls also get their posterior counterparts
    (:func:`bayesirt.audit.bayes.diagnostics.add_posterior_diagnostics`).
    """
    check_output(out, force=force)
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.audit.bayes.diagnostics import add_posterior_diagnostics  # import time, as above
    from bayesirt.audit.primary import run_audit  # import time, as above
    from bayesirt.audit.robustness import add_diagnostics  # import time, as above
    from bayesirt.data import attach_metadata, load  # import time, as above
    from bayesirt.report.audit_files import write_audit  # import time, as above

    responses = data if isinstance(data, xr.Dataset) else load(data)
    if models_csv is not None:
        responses = attach_metadata(responses, models_csv, "model")
    if items_csv is not None:
        responses = attach_metadata(responses, items_csv, "item")
    responses, family_source = _with_family_source(responses, derive_families)
    result = run_audit(responses, config, workers=workers, scheduler=scheduler, progress=progress)
    summary = {}
    for key, value in result.summary.items():  # family_source right after families
        summary[key] = value
        if key == "families":
            summary["family_source"] = family_source
    result.summary = summary
    add_diagnostics(result, responses, matched=matched, perturbations=perturbations, profiles=profiles,
                    workers=workers, scheduler=scheduler, progress=progress)
    add_posterior_diagnostics(result, responses, replicates=result.config.bayes_controls, workers=workers,
                              scheduler=scheduler, progress=progress)
    return write_audit(result, responses, out, force=force)


@declare(positional={"labels_csv": "CSV of content-audit labels: two annotators x matched high-DIF/control "
                                    "items"})
def run_content_audit_job(labels_csv, out, *,
                          permutations: int = option(10_000, "family-direction label permutations per annotator", low=1),
                          seed: int = option(0, "seed of the permutations", low=0), force: bool = False) -> Path:
    """Run :func:`content_audit` on ``labels_csv`` and write ``out``: summary.json, report.md and
    agreement.csv, binary_tests.csv, benchmark_directions.csv, confirmatory.csv,
    ordinal_tests.csv, family_permutation.csv."""
    check_output(out, force=force)
    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.audit.diagnostics.content import content_audit, read_labels
    from bayesirt.report.content import content_report  # import time, as above

    result = content_audit(read_labels(labels_csv), permutations=permutations, seed=seed)
    tables = {"agreement": result.agreement, "binary_tests": result.binary,
              "benchmark_directions": result.directions, "confirmatory": result.confirmatory,
              "ordinal_tests": result.ordinal, "family_permutation": result.family}
    with staged_output(out, force=force) as folder:
        for name, table in tables.items():
            table.to_csv(folder / f"{name}.csv", index=False)
        summary = {"labels": str(labels_csv)} | result.summary
        write_json(folder / "summary.json", summary)
        (folder / "report.md").write_text(content_report(result, Path(labels_csv).name))
    return Path(out)


@declare(positional={"left": "output folder of `bayesirt audit` on the first benchmark",
                     "right": "output folder of `bayesirt audit` on the second benchmark"},
         renamed={"replicates": "owner_bootstrap", "bootstrap": "owner_bootstrap"})
def run_common_models_job(left: str | Path, right: str | Path, out: str | Path, *,
                          owner_bootstrap: int = option(2000, "owner-bootstrap replicates", low=0),
                          seed: int = option(0, "seed of the owner bootstrap", low=0),
                          families=option(None, "comma-separated family labels to compare, as the audits wrote them "
                                                "(case matters) [all]", type=tuple, parse=comma_list),
                          derive_families: bool = option(False, "compare by the NT C.1 family labels of the model ids "
                                                                "instead of the audits' labels"),
                          force: bool = False) -> Path:
    """Compare two written audits on their exact common models; writes common_models.csv and report.md.

    Family labels are those the audits wrote, used as given; ``derive_families`` replaces them by
    the NT C.1 rule on the model ids (:func:`bayesirt.data.families.derive_family`) in both audits,
    and ``families`` (a sequence of labels; None: all) restricts the comparison to those families.
    """
    check_output(out, force=force)
    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.audit.diagnostics.common_models import audit_records, exact_common_shifts, select_families
    from bayesirt.report.content import common_models_report  # import time, as above

    records = select_families({"left": audit_records(left), "right": audit_records(right)}, families,
                               derive_families)
    table = exact_common_shifts(records["left"], records["right"], replicates=owner_bootstrap, seed=seed)
    with staged_output(out, force=force) as folder:
        table.to_csv(folder / "common_models.csv", index=False)
        report = common_models_report(table, left, right, replicates=owner_bootstrap, families=families,
                                      derive_families=derive_families)
        (folder / "report.md").write_text(report)
    return Path(out)
