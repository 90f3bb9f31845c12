"""The safety jobs (SAFE): ``bayesirt information``, ``cat``, ``personfit``, ``sandbag`` and ``fingerprint``: each reads its inputs, runs the analysis of :mod:`bayesirt.safety` and writes its output folder with :mod:`bayesirt.report`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bayesirt.data.settings import DATA_HELP
from bayesirt.errors import DataError, recorded_warnings
from bayesirt.safety.settings import (
    CALIBRATION_NULLS,
    DEFAULT_SHIFTS,
    DIRECTIONS,
    ESTIMATORS,
    FLIP_RATE,
    MODES,
    NULLS,
    PROMPTED_NOISE,
    SELECTION_RULES,
    STATIC_DESIGN,
    STATIC_DESIGNS,
    STATISTICS,
    TARGETS,
)
from bayesirt.utils.options import comma_floats, comma_ints, declare, option
from bayesirt.utils.outputs import check_output, staged_output, write_netcdf

if TYPE_CHECKING:  # annotations only
    import xarray as xr

__all__ = ["run_information_job", "run_cat_job", "run_personfit_job", "run_sandbag_job", "run_fingerprint_job"]


def _responses(data) -> xr.Dataset:
    """A response Dataset from a Dataset, a path or dataset name, or several benchmarks (combined)."""

    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.data import load  # import time, as above
    from bayesirt.safety.cat_study import combine_benchmarks  # import time, as above

    if isinstance(data, xr.Dataset):
        return data
    if isinstance(data, Mapping):
        return combine_benchmarks({k: _responses(v) for k, v in data.items()})
    if isinstance(data, (list, tuple)):
        names = [Path(p).stem for p in data]
        if len(set(names)) < len(names):
            raise DataError(f"benchmark files need distinct names (file stems) to label item_group; got {names}")
        return combine_benchmarks({n: load(p) for n, p in zip(names, data)})
    return load(data)


@declare(positional={"data": DATA_HELP}, renamed={"rule": "selection_rule", "calibration": "calibration_share"})
def run_cat_job(data, out, *,
                budgets=option((10, 25, 50, 100), "test lengths", parse=comma_ints, low=1),
                splits: int = option(20, "random calibration/test splits of the models", low=1),
                random_subsets: int = option(100, "random item subsets per budget and split", low=1),
                seed: int = option(0, "seed of splits and subsets", low=0),
                selection_rule: str = option("fisher", "CAT item selection", choices=SELECTION_RULES),
                estimator: str = option("eap", "ability update", choices=ESTIMATORS),
                per_benchmark: bool = option(False, "also score each benchmark (item group) on its own items"),
                calibration_share: float = option(0.75, "share of models that calibrate the items in each split", low=0,
                                                  high=1, open=True),
                target: str = option("auto", "full score: one benchmark's proportion correct, or the unweighted mean "
                                             "over pooled benchmarks (auto: the mean when the bank pools benchmarks)",
                                     choices=TARGETS),
                quotas: bool = option(False, "keep per-item-group quotas in the CAT, static and random tests"),
                static_design: str = option(STATIC_DESIGN, "design of the static test (max_information: SAFE's)",
                                            choices=STATIC_DESIGNS),
                workers: int | None = option(None, "worker processes for the splits: 1 runs them in this process, N > 1 "
                                                   "starts a local cluster of N [one per core]", type=int, low=1),
                scheduler: str | None = option(None, "address of an existing Dask scheduler (instead of local "
                                                       "workers)", type=str,
                                               toml="a running scheduler's address belongs to one session"),
                force: bool = False, progress: bool = True) -> Path:
    """Run :func:`cat_study` on ``data`` and write the folder ``out``.

    ``data`` is a response Dataset, a path or embedded-dataset name (:func:`bayesirt.data.load`),
    or a list of benchmark files / a mapping ``name -> Dataset or path`` (items concatenated,
    ``item_group`` = file stem or key; see :func:`combine_benchmarks`).

    Writes ``cat.nc`` (the study Dataset), ``cat_curves.csv`` (:func:`summarize_study`),
    ``static_tests.csv`` (:func:`static_tests`), ``cat_curves.png`` and ``report.md``; ``out``
    must not exist unless ``force``. Returns ``out``.
    """

    check_output(out, force=force)
    responses = _responses(data)
    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.report.cat import cat_report, plot_cat_curves
    from bayesirt.safety.cat_study import cat_study, static_tests, summarize_study  # import time, as above

    study = cat_study(responses, budgets=budgets, splits=splits, random_subsets=random_subsets,
                      calibration=calibration_share, rule=selection_rule, estimator=estimator,
                      per_benchmark=per_benchmark, target=target, quotas=quotas, static_design=static_design, seed=seed,
                      workers=workers, scheduler=scheduler, progress=progress)
    curves = summarize_study(study)
    tests = static_tests(responses, budgets, quotas=quotas, design=static_design)
    with staged_output(out, force=force) as folder:
        write_netcdf(study, folder / "cat.nc")
        curves.to_csv(folder / "cat_curves.csv", index=False)
        tests.to_csv(folder / "static_tests.csv", index=False)
        figures = [page.name for page in plot_cat_curves(curves, folder / "cat_curves.png", dict(study.attrs))]
        (folder / "report.md").write_text(cat_report(study, curves, figures))
    return Path(out)


@declare(positional={"source": "posterior.nc of a fit, an item-parameter .nc, or response data (calibrated "
                               "by MML)"})
def run_information_job(source, out, *,
                        spec: str = option("2pl", "spec used to calibrate response data", flag="--model"),
                        theta=option(None, "ability grid of the curves [-4 to 4]", type=object,
                                     cli="an array of abilities", toml="an array of abilities"),
                        max_draws: int | None = option(None, "posterior draws averaged over [all]", type=int, low=1),
                        force: bool = False) -> Path:
    """Information curves of a calibration, written to the folder ``out``.

    ``source`` is a fitted DataTree or a NetCDF file holding one (``posterior.nc`` of
    ``bayesirt fit``: curves averaged over posterior draws, :func:`~bayesirt.models.information.posterior_information`),
    an item-parameter Dataset (``discrimination``, ``intercept`` over ``item``), or response
    data (a Dataset, path or dataset name), which is calibrated by regularized MML with ``spec``
    first (:func:`~bayesirt.models.information.information_curves`).

    Writes ``information.nc``, ``information.csv`` (per theta: test information, SE and any
    per-group information), ``information.png`` and ``report.md``. Returns ``out``.
    """

    check_output(out, force=force)
    tree = None
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.data.responses import drop_constant_items  # import time, as above
    from bayesirt.frequentist.mml import fit_mml  # import time, as above
    from bayesirt.models.information import information_curves, posterior_information  # import time, as above
    from bayesirt.report.cat import information_report, plot_information  # import time, as above

    name = source.attrs.get("name") or "calibration" if isinstance(source, (xr.Dataset, xr.DataTree)) else str(source)
    if isinstance(source, xr.DataTree):
        tree = source
    elif isinstance(source, (str, Path)) and Path(source).suffix == ".nc":
        opened = xr.open_datatree(source, engine="h5netcdf")
        tree = opened if "posterior" in opened.children else None
    if tree is not None:
        info = posterior_information(tree, theta, max_draws=max_draws)
        info.attrs["parameters"] = f"posterior-averaged over {info.attrs['draws']} draws"
    elif isinstance(source, xr.Dataset) and "discrimination" in source:
        info = information_curves(source, theta)
        info.attrs["parameters"] = "item parameters as given"
    else:
        responses, dropped = drop_constant_items(_responses(source))
        fit = fit_mml(responses, spec, priors=True, se=False)
        info = information_curves(fit.items, theta)
        info.attrs["parameters"] = f"{spec} calibrated by MML with the spec's priors" + "".join(f"; {m}" for m in dropped)
    table = info[["test_information", "standard_error"]].to_dataframe().reset_index()
    if "group_information" in info:
        groups = info["group_information"].to_pandas().T.add_prefix("information_")
        table = table.join(groups.reset_index(drop=True))
    with staged_output(out, force=force) as folder:
        write_netcdf(info, folder / "information.nc")
        table.to_csv(folder / "information.csv", index=False)
        figure = plot_information(info, folder / "information.png").name
        (folder / "report.md").write_text(information_report(info, name, figure))
    return Path(out)


def _personfit_rules(v: dict) -> str | None:
    if v["reference"] is not None and v["posterior"] is not None:
        return "--posterior gives p-values for the calibration data itself; drop it when scoring against --reference"
    return None


def _sandbag_rules(v: dict) -> str | None:
    if v["labels"] is not None and v["reference"] is None:
        return "labels mark real runs as genuine or sandbagging; pass them with a reference cohort (--reference) and " \
               "the runs as data"
    return None


@declare(positional={"data": DATA_HELP}, check=_personfit_rules)
def run_personfit_job(data, out, *,
                      fpr: float = option(0.1, "false-positive rate on the genuine cohort", low=0, high=1, open=True),
                      statistic: str = option("lz", "person-fit statistic", choices=STATISTICS),
                      posterior=option(None, "posterior.nc of a fit: add posterior predictive person-fit p-values",
                                       type=str),
                      ppp_draws: int = option(500, "posterior draws of the posterior predictive p-values", low=1),
                      reference=option(None, "a separate genuine cohort (data file) that calibrates the items and the "
                                             "cut-off; DATA's models are then scored against it", type=str),
                      seed: int = option(0, "random seed", low=0), force: bool = False, progress: bool = True):
    """``bayesirt personfit``: calibrate, score person fit, set the cut-off, write ``out``.

    Items are calibrated by the regularized 2PL (``fit_mml(..., "2pl", priors=True)``, SAFE's
    calibration) on ``data``, which is also the genuine cohort of the cut-off; or, with
    ``reference``, on that separate genuine cohort: then the models of ``data`` (suspect runs, e.g.
    an endpoint's answers to a 40-item test or prompted-sandbagging runs) are scored on their items
    against the reference's calibration, and the cut-off is the reference cohort's ``fpr`` quantile
    on those same items (l_z depends on the test). Writes
    ``personfit.nc`` (DataTree: ``models``, ``items``), ``models.csv``, ``items.csv``,
    ``summary.json``, ``report.md`` and ``lz.png``.

    Parameters
    ----------
    data : path, dataset name or xarray.Dataset
    out : path
        Output folder (replaced only with ``force``).
    fpr : float, default 0.1
    statistic : {"lz", "lz_star"}, default "lz"
        The statistic the cut-off is set on (both are reported).
    posterior : path or xarray.DataTree, optional
        A fit of the same data (``posterior.nc`` of ``bayesirt fit``): adds posterior predictive
        person-fit p-values (``ppp``) from ``ppp_draws`` draws. Not with ``reference``.
    reference : path, dataset name or xarray.Dataset, optional
        The genuine cohort that calibrates the items and the cut-off; its items must include every
        item of ``data`` (matched by item id).
    seed : int, default 0
        Seed of the posterior predictive replicates.
    force : bool, default False
    progress : bool, default True
        A progress bar over the posterior predictive draws.
    """

    check_output(out, force=force)
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.data import load  # import time, as above
    from bayesirt.frequentist.mml import fit_mml  # import time, as above
    from bayesirt.report.safety import write_personfit  # import time, as above
    from bayesirt.safety.personfit import (  # import time, as above
        calibrate_cutoff, person_fit, posterior_predictive_person_fit,
    )

    responses = data if isinstance(data, xr.Dataset) else load(data)
    tree = None if posterior is None else posterior if isinstance(posterior, xr.DataTree) else _open_tree(posterior)
    cohort = responses if reference is None else reference if isinstance(reference, xr.Dataset) else load(reference)
    cohort, responses, dropped = _informative_cohort(cohort, responses, reference is None)
    calibration, messages = recorded_warnings(fit_mml, cohort, "2pl", priors=True, se=False)
    messages = dropped + messages
    items = calibration.items
    if reference is not None:
        suspect_items = responses["item"].values.astype(str)
        unknown = sorted(set(suspect_items) - set(cohort["item"].values.astype(str)))
        if unknown:
            raise DataError(f"{len(unknown)} item(s) of the scored file are not in the reference cohort (e.g. "
                            f"{unknown[:3]}); the reference must have answered every item it calibrates")
        items = items.sel(item=suspect_items)
        genuine = person_fit(cohort.sel(item=suspect_items), items)
    fit = person_fit(responses, items)
    cutoff = calibrate_cutoff((fit if reference is None else genuine)[statistic].values, fpr=fpr)
    fit["flagged"] = fit[statistic] <= cutoff
    ppp = None if tree is None else posterior_predictive_person_fit(tree, responses=responses, draws=ppp_draws,
                                                                   seed=seed, progress=progress)
    if ppp is not None:
        fit["ppp"] = ppp["ppp"]
    fit.attrs.update(cutoff=cutoff, fpr=fpr, statistic=statistic, calibration=calibration.attrs["method"])
    if reference is not None:
        fit.attrs.update(reference=str(reference) if not isinstance(reference, xr.Dataset)
                         else reference.attrs.get("name", "dataset"), reference_models=int(cohort.sizes["model"]))
    return write_personfit(fit, items, responses, out, ppp=ppp, warnings=messages, force=force,
                           genuine=None if reference is None else genuine)


def _informative_cohort(cohort: xr.Dataset, scored: xr.Dataset, same: bool):
    """The calibration cohort without zero-variance items (they carry no information and get extreme
    parameters), the scored runs on the remaining items (``same``: the cohort itself), and the note
    naming the dropped items (:func:`bayesirt.data.responses.drop_constant_items`)."""
    # import time: loaded when the job runs, not when the command line lists its options
    from bayesirt.data.responses import drop_constant_items

    kept, notes = drop_constant_items(cohort)
    if same:
        return kept, kept, notes
    constant = set(cohort["item"].values.astype(str)) - set(kept["item"].values.astype(str))
    keep = [i for i, v in enumerate(scored["item"].values.astype(str)) if v not in constant]
    return kept, scored.isel(item=keep), notes


def _open_tree(path) -> xr.DataTree:
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr

    try:
        return xr.open_datatree(path, engine="h5netcdf").load()
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read the posterior {path} ({type(err).__name__}); pass the posterior.nc "
                        "written by 'bayesirt fit'") from None


@declare(positional={"data": DATA_HELP}, check=_sandbag_rules, renamed={"target": "target_group"})
def run_sandbag_job(data, out, *,
                    fpr: float = option(0.1, "false-positive rate of the detectors", low=0, high=1, open=True),
                    statistic: str = option("lz", "person-fit statistic", choices=STATISTICS),
                    mode: str = option("ability_shift", "how a run sandbags: a coherent ability shift on the "
                                                        "targeted items (responses drawn from the fitted 2PL at the "
                                                        "shifted ability), independent random errors, or prompted "
                                                        "(the shift plus item-level errors)",
                                       choices=MODES),
                    shifts=option(DEFAULT_SHIFTS, "ability shifts in logits (ability_shift and prompted modes)",
                                  parse=comma_floats, low=0),
                    noise: float = option(PROMPTED_NOISE, "item-level error probability on top of the shift "
                                                          "(prompted mode)", low=0, high=1, open="high"),
                    strengths=option((0.25, 0.5, 0.75, 1.0), "change probabilities (random_errors mode)",
                                     parse=comma_floats, low=0, high=1),
                    direction: str = option("down", "down: toward fewer correct answers (less capable); up: the "
                                                    "reverse (e.g. more refusals on a refusal benchmark)",
                                            choices=DIRECTIONS),
                    trigger_fraction: float = option(0.25, "share of items carrying the trigger (triggered scope)",
                                                     low=0, high=1, open=True),
                    target_group: str = option("weakest", "item group of the targeted scope: weakest, strongest or "
                                                          "a group label"),
                    groups: int = option(6, "pseudo-groups when the data have fewer than two item groups", low=2),
                    test_length: int = option(40, "items of the ability-shift test (with --reference: a static test among the "
                                                  "suspects' items; person fit reads all of them)", low=1),
                    level: float = option(0.95, "confidence of the resolvable gap of the ability-shift test", low=0,
                                          high=1, open=True),
                    static_design: str = option(STATIC_DESIGN, "design of the ability-shift test (max_information: "
                                                               "SAFE's)", choices=STATIC_DESIGNS),
                    null: str = option("recollection", "where the detectors' cut-offs come from: simulated honest "
                                                       "re-collections of the genuine cohort, or its own history "
                                                       "(in_sample, SAFE)", choices=CALIBRATION_NULLS),
                    flip_rate: float = option(FLIP_RATE, "self-disagreement of an honest re-collection: share of cells "
                                                         "flipped (SAFE App. B median)", low=0, high=1, open=True),
                    seed: int = option(0, "random seed", low=0),
                    reference=option(None, "a separate genuine cohort (data file): DATA then holds real suspect runs, "
                                           "scored against it by person fit and ability shift instead of a simulation",
                                     type=str),
                    labels=option(None, "CSV model,label[,group] marking each suspect run genuine or sandbag: adds "
                                        "the detectors' ROC/AUC (with --reference)", type=str),
                    workers: int | None = option(1, "worker processes for the simulated runs: 1 runs them in this process, "
                                                      "N > 1 starts a local cluster of N", type=int, low=1),
                    scheduler: str | None = option(None, "address of an existing Dask scheduler (instead of local "
                                                         "workers)", type=str,
                                                   toml="a running scheduler's address belongs to one session"),
                    force: bool = False, progress: bool = True):
    """``bayesirt sandbag``: :func:`~bayesirt.safety.sandbagging.sandbagging_experiment` on ``data``
    (path, dataset name or Dataset), written to ``out``: sandbagging.nc (DataTree: genuine, runs,
    gaps, items), detection.csv, roc.csv, gaps.csv, genuine.csv, summary.json, report.md, lz.png,
    roc.png, shift.png.

    With ``reference`` (a genuine cohort: path, dataset name or Dataset), ``data`` holds real
    suspect runs instead, scored against it by :func:`~bayesirt.safety.sandbagging.score_suspects`
    (``fpr``, ``statistic``, ``level`` and ``seed`` apply): suspects.nc, suspects.csv, genuine.csv,
    summary.json, report.md. With ``labels`` as well (which runs are genuine and which were prompted
    to sandbag), also the detectors' ROC/AUC: roc_labelled.csv, auc_labelled.csv and a section of
    report.md."""
    check_output(out, force=force)
    # import time: loaded when the job runs, not when the command line lists its options
    import pandas as pd
    import xarray as xr
    from bayesirt.data import load  # import time, as above
    from bayesirt.report.safety import write_sandbag, write_suspects  # import time, as above
    from bayesirt.safety.sandbagging import (  # import time, as above
        labelled_roc, read_run_labels, sandbagging_experiment, score_suspects,
    )

    responses = data if isinstance(data, xr.Dataset) else load(data)
    if reference is not None:
        cohort = reference if isinstance(reference, xr.Dataset) else load(reference)
        cohort, responses, dropped = _informative_cohort(cohort, responses, False)
        (suspects, genuine, settings), messages = recorded_warnings(score_suspects, responses, cohort, fpr=fpr,
                                                                    statistic=statistic, level=level, null=null,
                                                                    flip_rate=flip_rate, test_length=test_length,
                                                                    static_design=static_design, seed=seed)
        messages = dropped + messages
        settings["reference"] = (str(reference) if not isinstance(reference, xr.Dataset)
                                 else reference.attrs.get("name", "dataset"))
        roc = None
        if labels is not None:
            roc = labelled_roc(suspects, genuine, read_run_labels(labels), statistic=statistic)
            settings["labels"] = str(labels) if not isinstance(labels, (Mapping, pd.DataFrame)) else "given"
        return write_suspects(suspects, genuine, settings, out, warnings=messages, force=force, roc=roc)
    responses, _, dropped = _informative_cohort(responses, responses, True)
    result, messages = recorded_warnings(sandbagging_experiment, responses, fpr=fpr, statistic=statistic, mode=mode,
                                         shifts=shifts, strengths=strengths, noise=noise, direction=direction,
                                         trigger_fraction=trigger_fraction, target=target_group, groups=groups,
                                         test_length=test_length, level=level, static_design=static_design,
                                         null=null, flip_rate=flip_rate, seed=seed, workers=workers,
                                         scheduler=scheduler, progress=progress)
    return write_sandbag(result, responses, out, warnings=dropped + messages, force=force)


def _read_identities(identities) -> dict | None:
    """A dict model id -> identity from a dict or a CSV with columns model_id, identity."""
    if identities is None or isinstance(identities, dict):
        return identities
    from pathlib import Path

    path = Path(identities)
    if not path.is_file():
        raise DataError(f"no identities file at {path}; give a CSV with columns model_id and identity")
    # import time: loaded when the job runs, not when the command line lists its options
    import pandas as pd

    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (ValueError, OSError, UnicodeError) as err:
        raise DataError(f"cannot read {path} ({type(err).__name__}); give a UTF-8 CSV with columns model_id "
                        "and identity") from None
    if not {"model_id", "identity"} <= set(table.columns):
        raise DataError(f"{path}: needs columns model_id and identity (has {list(table.columns)}); add them")
    if table["model_id"].duplicated().any():
        raise DataError(f"{path}: model_id {table['model_id'][table['model_id'].duplicated()].iloc[0]!r} appears "
                        "twice; keep one row per model")
    return dict(zip(table["model_id"], table["identity"], strict=True))


@declare(positional={"reference": "reference responses (" + DATA_HELP + ")",
                     "query": "query responses on the same items"})
def run_fingerprint_job(reference, query, out, *,
                        identities=option(None, "CSV model_id,identity marking repeated collections of one model",
                                          type=str),
                        alpha: float = option(0.05, "level of the self-disagreement null", low=0, high=1, open=True),
                        null: str = option("repeats", "self-disagreement null: repeated collections of one identity "
                                                      "(SAFE; refused without them), or a parametric resampling null "
                                                      "(far wider than real repeats)", choices=NULLS),
                        resamples: int = option(50, "resamples of the null without repeats", low=1),
                        items: int | None = option(None, "compare on the N pre-selected items on which reference "
                                                         "models disagree most (SAFE: 500) [all shared items]",
                                                   type=int, low=1),
                        seed: int = option(0, "random seed", low=0), force: bool = False):
    """``bayesirt fingerprint``: match every query endpoint to the reference collections.

    Parameters
    ----------
    reference, query : path, dataset name or xarray.Dataset
        Reference collections and the endpoints to audit (items matched by id).
    out : path
    identities : path or dict, optional
        CSV (columns ``model_id``, ``identity``) or dict mapping reference and query model ids
        to identities: reference collections sharing one are repeats (the null); a query's
        identity is its claim. Unlisted models are their own identity, so by default a query
        claims the reference with its model id.
    alpha, null, resamples, seed
        As :func:`identify` and :func:`self_disagreement_null` (default: repeated collections, refused
        without them; ``null="resampling"`` on request).
    items : int, optional
        Restrict reference and query to the ``items`` pre-selected fingerprint items of the
        reference (:func:`~bayesirt.safety.fingerprint.fingerprint_items`; SAFE's 500).
    force : bool, default False

    Writes fingerprint.nc (DataTree: disagreement, null, matches), matches.csv,
    disagreement.csv, null.csv, summary.json, report.md and fingerprint.png.
    """

    check_output(out, force=force)
    mapping = _read_identities(identities)
    # import time: loaded when the job runs, not when the command line lists its options
    import xarray as xr
    from bayesirt.data import load  # import time, as above
    from bayesirt.report.safety import write_fingerprint  # import time, as above
    from bayesirt.safety.fingerprint import (  # import time, as above
        disagreement, fingerprint_items, identify, identity_labels, self_disagreement_null,
    )
    from bayesirt.safety.personfit import check_responses  # import time, as above

    ref, qry = (d if isinstance(d, xr.Dataset) else load(d) for d in (reference, query))
    if items is not None:
        chosen = set(fingerprint_items(ref, items).astype(str))
        ref, qry = (d.isel(item=[i for i, v in enumerate(d["item"].values.astype(str)) if v in chosen])
                    for d in (ref, qry))
    calibration, messages = recorded_warnings(self_disagreement_null, ref, identity=mapping, null=null,
                                              resamples=resamples, seed=seed)
    matches = identify(ref, qry, calibration, reference_identity=mapping, claim=mapping, alpha=alpha)
    table = disagreement(ref, qry)
    ident = identity_labels(check_responses(ref), mapping, "reference")
    keep = np.sort(np.random.default_rng(seed).permutation(ident.size)[:500])  # cross-identity pairs for the figure
    cross = disagreement(ref.isel(model=keep), ref.isel(model=keep))["disagreement"].values
    cross = cross[np.triu(ident[keep][:, None] != ident[keep][None, :], k=1)]
    return write_fingerprint(table, calibration, matches, cross, ref, out, alpha=alpha, warnings=messages,
                             force=force)
