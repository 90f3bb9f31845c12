"""The ``bayesirt`` command-line tool.

    bayesirt fit DATA --model 2pl --method nuts --out outputs/NAME
    bayesirt datasets
    bayesirt run analyses/NAME.toml
    bayesirt mml DATA --model 2pl --out DIR          (marginal ML / MAP-EM)
    bayesirt ladder DATA --out DIR                   (1PL-4PL ladder, SAFE App. E)
    bayesirt mirt-mml DATA --dims 1,2,3,4 --folds 5 --out DIR   (item-level MIRT by MML, SAFE App. C)
    bayesirt check DATA --model 2pl --out DIR        (Bayes versus MML agreement)
    bayesirt splithalf DATA --out DIR                (split-half regularization check)
    bayesirt ppc DATA --model 2pl --out DIR          (posterior predictive checks)
    bayesirt prior-check --model 2pl --design 200x100 --out DIR   (or --data DATA)
    bayesirt sbc --model 2pl --design 100x40 --replicates 200 --out DIR [--workers N]
    bayesirt audit DATA --out DIR [--quick] [--bayes] [--models CSV] [--scheduler ADDR]   (NT near-tie audit)
    bayesirt content-audit LABELS.csv --out DIR [--permutations N] [--seed S]   (NT blinded content audit)
    bayesirt audit-compare LEFT_AUDIT RIGHT_AUDIT --out DIR     (exact-common-model shifts, NT B.7)
    bayesirt compare DATA --models rasch,2pl,3pl,4pl --out DIR   (LOO / K-fold by model)
    bayesirt compare DATA --dims 1,2,3,4 --out DIR               (MIRT dimensions)
    bayesirt factors ABILITIES.csv | DATA1 DATA2 DATA3 ... --out DIR   (factor structure of abilities)
    bayesirt information SOURCE --out DIR                 (item and test information curves)
    bayesirt cat DATA --budgets 10,25,50 --out DIR        (adaptive-testing study, SAFE Fig. 3)
    bayesirt personfit DATA --fpr 0.1 --out DIR           (l_z person fit, calibrated cut-off)
    bayesirt sandbag DATA --out DIR                       (sandbagging simulation and detection)
    bayesirt sandbag SUSPECTS --reference COHORT --out DIR (real suspect runs against a genuine cohort)
    bayesirt fingerprint REFERENCE QUERY --out DIR        (response fingerprints)

Problems with the input print one line naming the problem and the fix, never a traceback. Exit
status: 0 success; 2 a usage or data error; 3 the output was refused (the folder exists without
--force, or cannot be written); 1 an internal error (a bug), whose traceback is written to
``NAME.error.log`` beside the output folder (the message says where). The grammar of the
commands is in :mod:`.parser`.
"""

from __future__ import annotations

import logging
import sys
import time
import traceback
import warnings
from pathlib import Path

from bayesirt import __version__
from bayesirt.errors import BayesIRTError, OutputError, SpecError
from bayesirt.cli.parser import build_parser

__all__ = ["main"]


def _read_data(args):
    """DATA as a response Dataset, read with the reading options; None when the command has no DATA."""
    from bayesirt.data import load

    if getattr(args, "data", None) is None:
        return None
    given = {k: getattr(args, k) for k in ("metric", "stat", "filter", "aggregate", "binarize")}
    return load(args.data, drop_empty=not args.keep_empty, **{k: v for k, v in given.items() if v is not None})


def _polarity(declarations: list[str]) -> dict[str, int]:
    """``["orbench=-1", ...]`` -> ``{"orbench": -1}``; a malformed one is a SpecError naming it."""
    out = {}
    for item in declarations:
        name, _, value = item.partition("=")
        if not name or value.strip() not in ("1", "-1", "+1"):
            raise SpecError(f"--polarity {item!r}: write BENCHMARK=-1 (or =1), the benchmark named by its file stem")
        out[name.strip()] = int(value)
    return out


def _sampling_options(args) -> dict:
    return {"method": args.method, "sampler": args.sampler, "draws": args.draws, "tune": args.tune,
            "chains": args.chains, "seed": args.seed, "advi_iterations": args.advi_iterations}


def _quiet_libraries() -> None:
    """Keep PyMC/PyTensor chatter (deprecation notes, compile logs) off the user's terminal."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.formatwarning = lambda message, *args, **kwargs: f"bayesirt: warning: {message}\n"
    for name in ("pymc", "pytensor"):
        logging.getLogger(name).setLevel(logging.ERROR)


#: Exit statuses (README, "Exit status"): 0 success; 2 a usage or data error (argparse uses 2 too);
#: 3 the output was refused (the folder exists, or cannot be written); 1 an internal error.
EXIT_USAGE, EXIT_OUTPUT, EXIT_INTERNAL = 2, 3, 1


def _write_traceback(args) -> Path:
    """Write the current exception's traceback beside the output (``NAME.error.log`` next to the
    output folder; the working folder when there is none, or it cannot be written)."""
    out = getattr(args, "out", None)
    if out is None and getattr(args, "analysis", None):
        try:
            from bayesirt.cli import analyses

            out = analyses.load_analysis(args.analysis)["out"]
        except BayesIRTError:
            out = None
    text = f"bayesirt {__version__}, {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\nargs: {vars(args)}\n\n{traceback.format_exc()}"
    candidates = [Path(out).parent / f"{Path(out).name}.error.log"] if out else []
    candidates.append(Path.cwd() / "bayesirt.error.log")
    for path in candidates:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return path
        except OSError:
            continue
    return Path("(not written: no writable folder)")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _quiet_libraries()
    try:
        if args.command == "datasets":
            from bayesirt.data import list_datasets
            from bayesirt.report import markdown_table

            print(markdown_table(list_datasets()))
            return 0
        from bayesirt.cli import analyses
        from bayesirt.comparison import job as compare_job
        from bayesirt.frequentist import jobs as checks
        from bayesirt.workflow import jobs as workflow_jobs

        progress = not args.no_progress
        args.data = _read_data(args)
        match args.command:
            case "fit":
                out = analyses.run_fit_job(args.data, args.model, args.out, force=args.force, ci=args.ci,
                                           float32=args.float32, progress=progress, log_likelihood=args.log_likelihood,
                                           advi_batch_size=args.advi_batch_size, pairs=args.pairs,
                                           **_sampling_options(args))
            case "run":
                if args.force and args.resume:
                    raise SpecError("--force and --resume contradict each other: --force starts over, --resume keeps "
                                    "the finished steps; pass one")
                out = analyses.run_analysis(args.analysis, force=args.force, resume=args.resume, progress=progress)
            case "mml":
                out = checks.run_mml_job(args.data, args.model, args.out, force=args.force, quadrature=args.quadrature,
                                         priors=args.priors, se=not args.no_se, max_iter=args.max_iter)
            case "ladder":
                out = checks.run_ladder_job(args.data, args.out, force=args.force, quadrature=args.quadrature,
                                            max_iter=args.max_iter)
            case "mirt-mml":
                from bayesirt.frequentist.mml_mirt_job import run_mirt_mml_job

                out = run_mirt_mml_job(args.data, args.out, dims=tuple(args.dims), folds=args.folds, force=args.force,
                                       seed=args.seed, quadrature=args.quadrature, prune=args.prune,
                                       max_iter=args.max_iter, loading_prior=args.loading_prior,
                                       rotation=args.rotation, progress=progress)
            case "check":
                out = checks.run_check_job(args.data, args.model, args.out, force=args.force, progress=progress,
                                           quadrature=args.quadrature, threshold_sd=args.threshold_sd,
                                           **_sampling_options(args))
            case "ppc":
                out = workflow_jobs.run_ppc_job(args.data, args.model, args.out, force=args.force, progress=progress,
                                                ppc_draws=args.ppc_draws, alpha=args.alpha, float32=args.float32,
                                                **_sampling_options(args))
            case "prior-check":
                if (args.design is None) == (args.data is None):
                    raise SpecError("prior-check needs exactly one of --design MODELSxITEMS or --data DATA")
                out = workflow_jobs.run_prior_check_job(args.model, args.out, data=args.data, design=args.design,
                                                   force=args.force, draws=args.draws, seed=args.seed)
            case "sbc":

                out = workflow_jobs.run_sbc_job(args.model, args.out, design=args.design, force=args.force, progress=progress,
                                  replicates=args.replicates, method=args.method, draws=args.draws, tune=args.tune,
                                  chains=args.chains, thin=args.thin, bins=args.bins, seed=args.seed,
                                  workers=args.workers, scheduler=args.scheduler,
                                  advi_iterations=args.advi_iterations)
            case "audit":
                from bayesirt.audit import AuditConfig, run_audit_job

                config = AuditConfig(owner_cap=args.owner_cap, min_family_size=args.min_family_size, alpha=args.alpha,
                                     families=tuple(args.families) if args.families else None,
                                     epsilon=args.epsilon, controls=args.controls, bootstrap=args.bootstrap,
                                     owner_bootstrap=args.bootstrap, seed=args.seed, quick=args.quick,
                                     bayes=args.bayes, bayes_method=args.bayes_method,
                                     bayes_prior=args.bayes_prior, bayes_draws=args.bayes_draws,
                                     bayes_controls=args.bayes_controls,
                                     bayes_ability_spec=(None if args.bayes_ability_spec.lower() == "none"
                                                         else args.bayes_ability_spec),
                                     sensitivity=args.sensitivity,
                                     adjustment=args.adjustment)
                out = run_audit_job(args.data, args.out, models_csv=args.models, items_csv=args.items, config=config,
                                    derive_families=args.derive_families,
                                    matched=args.matched, perturbations=args.perturbations,
                                    profiles=args.profiles, workers=args.workers, scheduler=args.scheduler, force=args.force,
                                    progress=progress)
            case "audit-compare":
                from bayesirt.audit.common_models import run_common_models_job

                out = run_common_models_job(args.left, args.right, args.out, replicates=args.bootstrap,
                                            seed=args.seed, families=args.families,
                                            derive_families=args.derive_families, force=args.force)
            case "content-audit":
                from bayesirt.audit.content import run_content_audit_job

                out = run_content_audit_job(args.labels, args.out, permutations=args.permutations, seed=args.seed,
                                            force=args.force)
            case "compare":
                out = compare_job.run_compare_job(args.data, args.out, models=args.models, dims=args.dims,
                                               mirt_spec=args.mirt_spec, unit=args.unit, kfold=args.kfold,
                                               folds=args.folds, rotation=args.rotation, force=args.force,
                                               progress=progress, workers=args.workers, scheduler=args.scheduler,
                                               **_sampling_options(args))
            case "factors":
                from bayesirt.structure.ability_structure import run_factors_job

                out = run_factors_job(args.inputs, args.out, n_factors=args.n_factors and tuple(args.n_factors),
                                      rotation=args.rotation,
                                      method=args.method, draws=args.draws, tune=args.tune, chains=args.chains,
                                      advi_iterations=args.advi_iterations, bootstrap=args.bootstrap,
                                      cohort=args.cohort, polarity=_polarity(args.polarity),
                                      parallel_communalities=args.parallel_communalities,
                                      parallel_iter=args.parallel_iter, seed=args.seed, force=args.force,
                                      progress=progress)
            case "information":
                from bayesirt.safety.cat_study import run_information_job

                out = run_information_job(args.source, args.out, spec=args.model, force=args.force)
            case "cat":
                from bayesirt.safety.cat_study import run_cat_job

                out = run_cat_job(args.data, args.out, budgets=tuple(args.budgets), splits=args.splits,
                                  random_subsets=args.random_subsets, rule=args.rule, estimator=args.estimator,
                                  seed=args.seed, workers=args.workers, scheduler=args.scheduler, force=args.force,
                                  progress=progress)
            case "personfit":
                from bayesirt.safety.personfit import run_personfit_job

                out = run_personfit_job(args.data, args.out, fpr=args.fpr, statistic=args.statistic,
                                        posterior=args.posterior, reference=args.reference, seed=args.seed,
                                        force=args.force, progress=progress)
            case "sandbag":
                from bayesirt.safety.sandbagging import run_sandbag_job

                out = run_sandbag_job(args.data, args.out, fpr=args.fpr, statistic=args.statistic,
                                      direction=args.direction, test_length=args.test_length, seed=args.seed,
                                      workers=args.workers, scheduler=args.scheduler, reference=args.reference,
                                      force=args.force, progress=progress)
            case "fingerprint":
                from bayesirt.safety.fingerprint import run_fingerprint_job

                out = run_fingerprint_job(args.reference, args.query, args.out, identities=args.identities,
                                          alpha=args.alpha, resamples=args.resamples, seed=args.seed, force=args.force)
            case "splithalf":
                out = checks.run_splithalf_job(args.data, args.out, model=args.model, force=args.force, progress=progress,
                                               splits=args.splits, top=args.top, seed=args.seed, quadrature=args.quadrature)
    except OutputError as err:
        print(f"bayesirt: error: {err}", file=sys.stderr)
        return EXIT_OUTPUT
    except BayesIRTError as err:
        print(f"bayesirt: error: {err}", file=sys.stderr)
        return EXIT_INTERNAL if getattr(err, "internal", False) else EXIT_USAGE  # StepsFailed by a bug
    except KeyboardInterrupt:
        print("bayesirt: interrupted; no output was written (an earlier result, if any, is untouched)", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 (a bug: its traceback goes to a file, the user gets one line)
        log = _write_traceback(args)
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        print(f"bayesirt: internal error ({type(err).__name__}{': ' + first if first else ''}); this is a bug in "
              f"bayesirt, not in your input: the traceback is in {log}; please report it with that file",
              file=sys.stderr)
        return EXIT_INTERNAL
    files = sorted(p.name for p in out.iterdir())
    print(f"bayesirt: wrote {out}/ ({', '.join(files)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
