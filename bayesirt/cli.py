"""The ``bayesirt`` command-line tool.

    bayesirt fit DATA --model 2pl --method nuts --out outputs/NAME
    bayesirt datasets
    bayesirt run analyses/NAME.toml

Problems with the input print one line naming the problem and the fix (exit status 2), never a
traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings

from bayesirt import __version__
from bayesirt.errors import BayesIRTError
from bayesirt.inference import METHODS, SAMPLERS

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bayesirt", description="Bayesian item response theory for auditing AI benchmarks.")
    parser.add_argument("--version", action="version", version=f"bayesirt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    f = sub.add_parser("fit", help="fit an IRT spec to response data and write posterior, tables, report, figures")
    f.add_argument("data", help="a data file (wide/long CSV, Parquet, NPZ, NT folder, .nc) or an embedded dataset name")
    f.add_argument("--model", default="2pl", help="built-in spec (rasch/1pl, 2pl, 3pl, 4pl) or a spec file path [2pl]")
    f.add_argument("--method", default="nuts", choices=METHODS, help="inference method [nuts]")
    f.add_argument("--sampler", default="nutpie", choices=SAMPLERS, help="NUTS implementation [nutpie]")
    f.add_argument("--draws", type=int, default=1000, help="draws per chain (ADVI: from the approximation) [1000]")
    f.add_argument("--tune", type=int, default=1000, help="tuning steps per chain [1000]")
    f.add_argument("--chains", type=int, default=4, help="chains [4]")
    f.add_argument("--seed", type=int, default=0, help="random seed; same seed, same arrays [0]")
    f.add_argument("--advi-iterations", type=int, default=50_000, help="ADVI iteration cap [50000]")
    f.add_argument("--ci", type=float, default=0.9, help="credible-interval probability of tables [0.9]")
    f.add_argument("--log-likelihood", action="store_true", help="store pointwise log-likelihood (for LOO)")
    f.add_argument("--out", required=True, help="output folder (must not exist unless --force)")
    f.add_argument("--force", action="store_true", help="replace an existing output folder")
    f.add_argument("--no-progress", action="store_true", help="hide progress bars")

    sub.add_parser("datasets", help="list the embedded datasets")

    r = sub.add_parser("run", help="run a declared analysis (analyses/*.toml)")
    r.add_argument("analysis", help="path of the analysis spec")
    r.add_argument("--force", action="store_true", help="replace an existing output folder")
    r.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return parser


def _quiet_libraries() -> None:
    """Keep PyMC/PyTensor chatter (deprecation notes, compile logs) off the user's terminal."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    for name in ("pymc", "pytensor"):
        logging.getLogger(name).setLevel(logging.ERROR)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _quiet_libraries()
    try:
        if args.command == "datasets":
            from bayesirt.data import list_datasets
            from bayesirt.report import markdown_table

            print(markdown_table(list_datasets()))
            return 0
        from bayesirt.analyses import run_analysis, run_fit_job

        if args.command == "fit":
            out = run_fit_job(
                args.data, args.model, args.out, force=args.force, ci=args.ci, progress=not args.no_progress,
                method=args.method, sampler=args.sampler, draws=args.draws, tune=args.tune, chains=args.chains,
                seed=args.seed, advi_iterations=args.advi_iterations, log_likelihood=args.log_likelihood,
            )
        else:
            out = run_analysis(args.analysis, force=args.force, progress=not args.no_progress)
    except BayesIRTError as err:
        print(f"bayesirt: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bayesirt: interrupted; no output was written (an earlier result, if any, is untouched)", file=sys.stderr)
        return 130
    print(f"bayesirt: wrote {out}/ (report.md, posterior.nc, items.csv, models.csv, figures)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
