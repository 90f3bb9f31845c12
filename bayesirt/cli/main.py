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
    bayesirt compare DATA --specs rasch,2pl,3pl,4pl --out DIR    (LOO / K-fold by model)
    bayesirt compare DATA --dims 1,2,3,4 --out DIR               (MIRT dimensions)
    bayesirt factors ABILITIES.csv | DATA1 DATA2 DATA3 ... --out DIR   (factor structure of abilities)
    bayesirt information SOURCE --out DIR                 (item and test information curves)
    bayesirt cat DATA --budgets 10,25,50 --out DIR        (adaptive-testing study, SAFE Fig. 3)
    bayesirt personfit DATA --fpr 0.1 --out DIR           (l_z person fit, calibrated cut-off)
    bayesirt sandbag DATA --out DIR                       (sandbagging simulation and detection)
    bayesirt sandbag SUSPECTS --reference COHORT --out DIR (real suspect runs against a genuine cohort)
    bayesirt fingerprint REFERENCE QUERY --out DIR        (response fingerprints)
    bayesirt select BANK --budget K --out DIR             (a K-item test from a calibrated bank)
    bayesirt score BANK RESPONSES --out DIR               (full-benchmark accuracy from a partial run)

Problems with the input print one line naming the problem and the fix, never a traceback. Exit
status: 0 success; 2 a usage or data error; 3 the output was refused (the folder exists without
--force, or cannot be written); 1 an internal error (a bug), whose traceback is written to
``NAME.error.log`` beside the output folder (the message says where; a later successful run on the
same output removes it); 130 interrupted (Ctrl-C or SIGTERM, at any stage): one line saying that
nothing was written, or what was kept and how a rerun continues. The grammar of the
commands is generated from the jobs' declared options in :mod:`.parser`.
"""

from __future__ import annotations

import inspect
import logging
import sys
import time
import traceback
import warnings
from pathlib import Path

from bayesirt import __version__
from bayesirt.cli.parser import build_parser, chosen_command, cli_options, command_job
from bayesirt.utils.options import call, positional_of
from bayesirt.utils.progress import show_progress
from bayesirt.utils.interrupts import Interrupted, catching_signals, interrupt_received
from bayesirt.errors import BayesIRTError, ConfigError, OutputError

__all__ = ["main"]


def _quiet_libraries() -> None:
    """Keep PyMC/PyTensor chatter (deprecation notes, compile logs) off the user's terminal."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.formatwarning = lambda message, *args, **kwargs: f"bayesirt: warning: {message}\n"
    for name in ("pymc", "pytensor"):
        logging.getLogger(name).setLevel(logging.ERROR)


#: Exit statuses (README, "Exit status"): 0 success; 2 a usage or data error (argparse uses 2 too);
#: 3 the output was refused (the folder exists, or cannot be written); 1 an internal error; 130
#: interrupted (SIGINT or SIGTERM; 128 + SIGINT, as shells report Ctrl-C).
EXIT_USAGE, EXIT_OUTPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 2, 3, 1, 130


def _write_traceback(args) -> Path:
    """Write the current exception's traceback beside the output (``NAME.error.log`` next to the
    output folder; the working folder when there is none, or it cannot be written)."""
    out = getattr(args, "out", None)
    if out is None and getattr(args, "analysis", None):
        try:
            from bayesirt.jobs.analysis import load_analysis  # import time: only after a failure

            out = load_analysis(args.analysis)["out"]
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


def _run_command(args) -> Path:
    """Call the command's job with the positional arguments and the flags given (the job's own
    defaults for the others); DATA is read first, with the reading options."""
    from bayesirt.data.io import READ_OPTIONS, load  # import time: the data layer loads with a command, not --help

    job = command_job(args.command)
    values = {k: v for k, v in vars(args).items() if k != "command"}
    show_progress(values.get("progress", True))  # bayesirt's own bars; the samplers' through the job's progress=
    if "progress" not in inspect.signature(job).parameters:
        values.pop("progress", None)
    for name, opt in (cli_options(job) | READ_OPTIONS).items():
        if opt.repeat and name in values:  # a repeatable flag: its values as one option
            try:
                values[name] = opt.parse(values[name])
            except ValueError as err:
                raise ConfigError(f"{opt.cli_flag}: {err}") from None
    reading = {name: values.pop(name) for name in READ_OPTIONS if name in values}
    positional = [values.pop(name) for name in positional_of(job)]
    if "data" in positional_of(job):
        positional[0] = load(positional[0], **reading)
        if positional[0].attrs.get("harness_summary"):  # what was found in harness output, in one line
            print(f"bayesirt: read {positional[0].attrs['harness_summary']}", file=sys.stderr)
    return call(job, *positional, **values)


def _dispatch(args) -> Path | None:
    """Run the command; returns the output folder written (None for `datasets`, which prints)."""
    if args.command == "datasets":
        from bayesirt.data import list_datasets  # import time: the data layer loads with a command, not --help
        from bayesirt.report import markdown_table

        print(markdown_table(list_datasets()))
        return None
    if args.command == "run":
        from bayesirt.jobs.analysis import run_analysis  # import time, as above

        if args.force and args.resume:
            raise ConfigError("--force and --resume contradict each other: --force starts over, --resume keeps "
                              "the finished steps; pass one")
        show_progress(args.progress)
        return run_analysis(args.analysis, force=args.force, resume=args.resume, progress=args.progress)
    return _run_command(args)


def _interrupted(args, err: BaseException) -> str:
    """The one line of an interrupted command: what was kept and how to continue, or that nothing
    was written (and that an earlier result at --out is untouched)."""
    if isinstance(err, Interrupted):
        return f"bayesirt: interrupted: {err.kept}"
    out = getattr(args, "out", None)
    earlier = f" (the earlier result in {out} is untouched)" if out and Path(out).exists() else ""
    return f"bayesirt: interrupted: nothing was written{earlier}"


def _failed(args, err: Exception) -> int:
    """Print the one line of a failed command; returns its exit status."""
    if isinstance(err, OutputError):
        print(f"bayesirt: error: {err}", file=sys.stderr)
        return EXIT_OUTPUT
    if isinstance(err, BayesIRTError):
        print(f"bayesirt: error: {err}", file=sys.stderr)
        return EXIT_INTERNAL if getattr(err, "internal", False) else EXIT_USAGE  # StepsFailed by a bug
    log = _write_traceback(args)
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    print(f"bayesirt: internal error ({type(err).__name__}{': ' + first if first else ''}); this is a bug in "
          f"bayesirt, not in your input: the traceback is in {log}; please report it with that file",
          file=sys.stderr)
    return EXIT_INTERNAL


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser(chosen_command(argv)).parse_args(argv)
    except ConfigError as err:  # a flag's value refused by its declared option
        print(f"bayesirt: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    _quiet_libraries()
    try:
        with catching_signals():
            try:
                out = _dispatch(args)
            except (KeyboardInterrupt, Exception) as err:  # noqa: BLE001 (every failure ends in one line)
                # an error after SIGINT/SIGTERM is the interrupt's doing (a library that turned it into another error)
                if isinstance(err, KeyboardInterrupt) or interrupt_received():
                    print(_interrupted(args, err), file=sys.stderr)
                    return EXIT_INTERRUPTED
                return _failed(args, err)
    except KeyboardInterrupt:  # a second Ctrl-C while the first one's line was printed: no traceback
        return EXIT_INTERRUPTED
    if out is None:
        return 0
    Path(out.parent / f"{out.name}.error.log").unlink(missing_ok=True)  # a failed earlier run's log is stale now
    files = sorted(p.name for p in out.iterdir())
    print(f"bayesirt: wrote {out}/ ({', '.join(files)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
