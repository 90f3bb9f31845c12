"""``bayesirt audit``: read the data, run the primary audit, write its folder."""

from __future__ import annotations

from pathlib import Path

import xarray as xr

from bayesirt.audit.bayes_diagnostics import add_posterior_diagnostics
from bayesirt.audit.output import write_audit
from bayesirt.audit.primary import run_audit
from bayesirt.audit.result import AuditConfig
from bayesirt.audit.robustness import add_diagnostics
from bayesirt.data import load
from bayesirt.data import attach_metadata
from bayesirt.data.families import derive_family
from bayesirt.utils.outputs import check_output

__all__ = ["run_audit_job", "FAMILY_SOURCES"]

FAMILY_SOURCES = ("supplied", "derived from model ids")
"""Values of ``summary["family_source"]``: where the audited family labels came from."""


def _with_family_source(responses: xr.Dataset, derive_families: bool) -> tuple[xr.Dataset, str]:
    """The Dataset the audit runs on and where its family labels come from.

    With ``derive_families`` the family labels are replaced by the NT C.1 rule on the model ids.
    Otherwise they are kept as they are; they count as "derived from model ids" when they equal
    that rule's labels (data without family labels get exactly those from
    :func:`~bayesirt.data.make_responses`), and as "supplied" otherwise.
    """
    derived = derive_family(responses["model_id"].values.astype(str))
    if derive_families:
        return responses.assign_coords(family=("model", derived)), FAMILY_SOURCES[1]
    same = bool((responses["family"].values.astype(str) == derived).all())
    return responses, FAMILY_SOURCES[1] if same else FAMILY_SOURCES[0]


def run_audit_job(data, out, *, models_csv=None, items_csv=None, config: AuditConfig | None = None,
                  derive_families: bool = False, matched: bool = False, perturbations: bool = False,
                  profiles: bool = False, workers: int | None = 1, scheduler: str | None = None,
                  force: bool = False, progress: bool = True) -> Path:
    """Run the primary audit on ``data`` (a path, dataset name or response Dataset) and write
    ``out``: audit.nc, summary.json, report.md, controls.png and the per-fold CSV tables.

    ``models_csv`` (``model_id`` + ``family``/``owner``) and ``items_csv`` (``item_id`` +
    ``item_group``) replace the labels derived from the ids or read with the data. Family labels
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
    (:func:`bayesirt.audit.bayes_diagnostics.add_posterior_diagnostics`).
    """
    check_output(out, force=force)
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
