"""The grammar of the ``bayesirt`` command line, generated from the jobs' declared options
(:mod:`bayesirt.utils.options`): every flag, its type, choices, default and help come from the
declaration beside the job, so the command line, the analysis files and the Python keywords agree.

A job's positional parameters become positional arguments (``data`` also takes the reading
options of :data:`bayesirt.data.io.READ_OPTIONS`); ``out``, ``force`` and ``progress`` become
``--out``, ``--force`` and ``--no-progress``. Only the chosen command's job module is imported, so
``bayesirt --help`` stays fast. What the commands do is in :mod:`.main`."""

from __future__ import annotations

import argparse
import importlib
import re
import sys

from bayesirt import __version__
from bayesirt.errors import ConfigError, did_you_mean
from bayesirt.utils.options import Option, check_options, options_of, positional_of, renamed_of

__all__ = ["COMMANDS", "build_parser", "command_job", "cli_options", "READ_GROUP"]

#: command -> (job as "module:function", one-line help). ``datasets`` and ``run`` are not jobs.
COMMANDS = {
    "fit": ("bayesirt.jobs.fit:run_fit_job",
            "fit an IRT spec to response data and write posterior, tables, report, figures"),
    "mml": ("bayesirt.jobs.frequentist:run_mml_job", "fit a spec by marginal maximum likelihood (Bock-Aitkin EM)"),
    "ladder": ("bayesirt.jobs.frequentist:run_ladder_job", "fit 1PL, 2PL, 3PL, 4PL by MML and compare (AIC, BIC, LRT)"),
    "mirt-mml": ("bayesirt.jobs.frequentist:run_mirt_mml_job",
                 "item-level MIRT (D = 1..4) by marginal ML, D chosen by held-out likelihood over models and BIC "
                 "(SAFE App. C)"),
    "check": ("bayesirt.jobs.frequentist:run_check_job",
              "fit a spec by NUTS/ADVI and by MML/MAP-EM and report their agreement"),
    "splithalf": ("bayesirt.jobs.frequentist:run_splithalf_job",
                  "split-half retention of top discriminations, with and without priors"),
    "ppc": ("bayesirt.jobs.workflow:run_ppc_job",
            "fit a spec and run posterior predictive checks (item fit, score spread)"),
    "prior-check": ("bayesirt.jobs.workflow:run_prior_check_job",
                    "what a spec's priors imply about data (prior predictive check)"),
    "sbc": ("bayesirt.jobs.workflow:run_sbc_job", "simulation-based calibration of a spec and an inference method"),
    "audit": ("bayesirt.jobs.audit:run_audit_job", "family-DIF near-tie audit of LLM rankings (NT primary analysis)"),
    "audit-compare": ("bayesirt.jobs.audit:run_common_models_job",
                      "family shifts of two audits on their exact common models (NT B.7)"),
    "content-audit": ("bayesirt.jobs.audit:run_content_audit_job",
                      "blinded content-audit statistics of two annotators' labels (NT D.4)"),
    "compare": ("bayesirt.jobs.comparison:run_compare_job",
                "compare specs or MIRT dimensions by cross-validated elpd (LOO, K-fold by model)"),
    "factors": ("bayesirt.jobs.structure:run_factors_job",
                "factor structure of abilities: minres EFA, rotation, RMSEA/CFI, parallel analysis"),
    "information": ("bayesirt.jobs.safety:run_information_job",
                    "item and test information curves (posterior-averaged for a fit)"),
    "cat": ("bayesirt.jobs.safety:run_cat_job",
            "adaptive testing on held-out models: CAT vs informed and random tests (SAFE Fig. 3)"),
    "personfit": ("bayesirt.jobs.safety:run_personfit_job",
                  "l_z person fit with a cut-off calibrated to a false-positive rate"),
    "sandbag": ("bayesirt.jobs.safety:run_sandbag_job", "simulate uniform/targeted/triggered sandbagging and detect it"),
    "fingerprint": ("bayesirt.jobs.safety:run_fingerprint_job",
                    "identify endpoints by response disagreement with reference responses"),
    "select": ("bayesirt.jobs.bank:run_select_job",
               "a K-item test from a calibrated bank, with lm-eval --samples and Inspect sample ids"),
    "score": ("bayesirt.jobs.bank:run_score_job",
              "each model's full-benchmark accuracy with an interval from a partial run on a bank's items"),
}
READ_GROUP = "reading DATA"


def command_job(command: str):
    """The job function behind ``command`` (its module imported now)."""
    module, name = COMMANDS[command][0].split(":")
    return getattr(importlib.import_module(module), name)


def cli_options(job) -> dict[str, Option]:
    """The declared options of ``job`` that the command line offers (those without a ``cli`` reason)."""
    return {name: opt for name, opt in options_of(job).items() if opt.cli is None}


def _text(opt: Option) -> str:
    """The help of an option with its default (unless the help already names it in brackets)."""
    if re.search(r" \[[^]]*\]$", opt.help) or opt.value_type is bool or opt.required:  # no default to show
        return opt.help.replace("%", "%%")
    default = opt.default
    if default is None:  # unset: the help says what happens
        return opt.help.replace("%", "%%")
    if isinstance(default, (tuple, list)):
        default = ",".join(str(v) for v in default)
    return f"{opt.help} [{default}]".replace("%", "%%")


class _Refused(Exception):
    """A declared option's check refused a flag's value (carried past argparse, which would turn a
    ConfigError, a ValueError, into its own message)."""

    def __init__(self, error: ConfigError):
        super().__init__(str(error))
        self.error = error


class Parser(argparse.ArgumentParser):
    """argparse with the options' own checks: a refused value raises the option's
    :class:`ConfigError` (the one message form), and a flag that is not one gets the closest
    flag that is ("did you mean --budget?"). Abbreviated flags are not accepted."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        self._given = list(sys.argv[1:] if args is None else args)
        try:
            parsed, extras = super().parse_known_args(args, namespace)
        except _Refused as refused:
            raise refused.error from None
        if any(e.startswith("-") for e in extras):  # a command's unknown flag: said by the command's parser
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def parse_args(self, args=None, namespace=None):
        """The parsed command line, its options checked together (the rules across options)."""
        parsed = super().parse_args(args, namespace)
        if getattr(parsed, "command", None) in COMMANDS:
            job = command_job(parsed.command)
            check_options(job, {k: v for k, v in vars(parsed).items() if k in cli_options(job)}, caller=parsed.command)
        return parsed

    def error(self, message):
        flags = [a for a in getattr(self, "_given", ()) if a.startswith("--") and a != "--"]
        unknown = [f.split("=")[0] for f in flags if f.split("=")[0] not in self._option_string_actions]
        if unknown and message.startswith(("unrecognized arguments", "the following arguments are required")):
            hint = did_you_mean(unknown[0], [f for f in self._option_string_actions if f.startswith("--")])
            message = f"unrecognized argument {unknown[0]}{hint.replace(chr(39), '')}"
        super().error(message)


def _metavar(opt: Option) -> str | None:
    """``{a,b,c}`` for an option with choices (argparse's own form), else argparse's default."""
    return "{" + ",".join(str(c) for c in opt.choices) + "}" if opt.choices else None


def _converter(opt: Option, command: str):
    """The flag's text as the option's value (parsed, then checked against the declaration)."""
    parse = opt.parse if opt.parse is not None and not opt.repeat else {int: int, float: float}.get(opt.value_type, str)

    def convert(text):
        try:
            value = parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        if opt.repeat:
            return value
        try:
            return opt.check(value, caller=command)
        except ConfigError as err:
            raise _Refused(err) from None

    convert.__name__ = opt.value_type.__name__ if opt.parse is None else opt.name
    return convert


def add_option(parser, opt: Option, command: str) -> None:
    """One declared option as a flag whose value goes to ``opt.name`` only when it is given (so the
    job's own default applies otherwise)."""
    common = {"dest": opt.name, "default": argparse.SUPPRESS, "help": _text(opt)}
    if opt.value_type is bool:
        parser.add_argument(opt.cli_flag, action="store_false" if opt.default else "store_true", **common)
        return
    parser.add_argument(opt.cli_flag, type=_converter(opt, command), metavar=opt.metavar or _metavar(opt),
                        action="append" if opt.repeat else "store", required=opt.required, **common)


class _Renamed(argparse.Action):
    """The old flag of a renamed option: its value goes to the new one, with a warning."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"bayesirt: warning: {option_string} is now {self.metavar}; the old flag goes in the next release",
              file=sys.stderr)
        setattr(namespace, self.dest, values)


def _add_job(sub, command: str) -> None:
    job = command_job(command)
    p = sub.add_parser(command, help=COMMANDS[command][1], description=COMMANDS[command][1])
    for name, help_text in positional_of(job).items():
        p.add_argument(name, nargs="+" if name == "inputs" else None, help=help_text)
    for opt in cli_options(job).values():
        add_option(p, opt, command)
    for old, new in renamed_of(job).items():
        opt = options_of(job)[new]
        if f"--{old.replace('_', '-')}" not in p._option_string_actions:
            p.add_argument(f"--{old.replace('_', '-')}", dest=new, type=_converter(opt, command), action=_Renamed,
                           metavar=opt.cli_flag, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    if "data" in positional_of(job):
        from bayesirt.data.settings import READ_OPTIONS  # import time: `bayesirt --help` does not load the data layer

        group = p.add_argument_group(READ_GROUP)
        for opt in READ_OPTIONS.values():
            add_option(group, opt, "load")
    p.add_argument("--out", required=True, help="output folder (must not exist unless --force)")
    p.add_argument("--force", action="store_true", default=argparse.SUPPRESS, help="replace an existing output folder")
    p.add_argument("--no-progress", dest="progress", action="store_false", default=argparse.SUPPRESS,
                   help="hide progress bars")


def build_parser(commands=tuple(COMMANDS)) -> argparse.ArgumentParser:
    """The argument parser: every command listed, with the flags of those in ``commands``."""
    parser = Parser(prog="bayesirt", description="Bayesian item response theory for auditing AI "
                                                                  "benchmarks.")
    parser.add_argument("--version", action="version", version=f"bayesirt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_, help_text) in COMMANDS.items():
        if name in commands:
            _add_job(sub, name)
        else:
            sub.add_parser(name, help=help_text)
    sub.add_parser("datasets", help="list the embedded datasets")
    r = sub.add_parser("run", help="run a declared analysis (analyses/*.toml)")
    r.add_argument("analysis", help="path of the analysis spec")
    r.add_argument("--force", action="store_true", help="replace an existing output folder")
    r.add_argument("--resume", action="store_true",
                   help="rerun only the steps that are missing or failed in the output folder, with its recorded settings")
    r.add_argument("--no-progress", dest="progress", action="store_false", help="hide progress bars")
    return parser


def chosen_command(argv: list[str] | None) -> tuple[str, ...]:
    """The job command of ``argv`` (its first word that is not a flag) as a 1-tuple, or ()."""
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    return (words[0],) if words and words[0] in COMMANDS else ()
