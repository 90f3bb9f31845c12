"""Declared analyses (``analyses/*.toml``), run end to end: a fit, an audit or the safety suite.

An analysis file has an ``[analysis]`` table (``kind``, ``data``, ``out``; for a fit also ``model``,
the spec) and one table of options named after its kind, whose keys and values are checked against
the job's declared options (:func:`bayesirt.utils.options.options_of`): the same names, types,
choices and defaults as the command line and the Python keywords. ``[read]`` sets how ``data`` is read
(:data:`bayesirt.data.io.READ_OPTIONS`); an audit of generated data has ``data =
"simulate_dif_benchmark"`` and a ``[simulate]`` table (:func:`bayesirt.data.simulate_dif_benchmark`)."""

from __future__ import annotations

from pathlib import Path

from bayesirt.data import load, simulate_dif_benchmark
from bayesirt.data.settings import READ_OPTIONS
from bayesirt.errors import SpecError, did_you_mean
from bayesirt.jobs.audit import run_audit_job
from bayesirt.jobs.fit import run_fit_job
from bayesirt.jobs.suite import DEFAULT_STEPS, SAFETY_STEPS, check_step_options, run_safety_suite
from bayesirt.models.specs import parse_toml, toml_text
from bayesirt.utils.options import Option, call, check_options, options_of, renamed_options

__all__ = ["ANALYSIS_KINDS", "SIMULATED", "load_analysis", "run_analysis", "table_options"]

ANALYSIS_KINDS = ("fit", "audit", "safety")
_JOBS = {"fit": run_fit_job, "audit": run_audit_job}
_REQUIRED = {"fit": ("data", "model", "out"), "audit": ("data", "out"), "safety": ("out",)}
SIMULATED = "simulate_dif_benchmark"
"""``data`` value of an audit analysis whose data are generated from its ``[simulate]`` table."""


def table_options(kind: str) -> dict[str, Option]:
    """The options the ``[<kind>]`` table of an analysis file may set: the declared options of the
    kind's job that analysis files accept (the spec is ``[analysis] model``)."""
    return {name: opt for name, opt in options_of(_JOBS[kind]).items() if opt.toml is None and name != "spec"}


def _tables(kind: str) -> dict[str, dict[str, Option]]:
    if kind == "safety":
        return {}
    return {kind: table_options(kind), "read": dict(READ_OPTIONS)} | (
        {"simulate": options_of(simulate_dif_benchmark)} if kind == "audit" else {})


def load_analysis(path: str | Path) -> dict:
    """Read and validate an analysis spec (``analyses/*.toml``): every table and option is checked
    before any work, with the file, table and option named in the message."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"no analysis spec at {path}; give the path of a .toml file such as analyses/demo.toml")
    raw = parse_toml(toml_text(path), where=str(path))
    head = raw.get("analysis")
    if not isinstance(head, dict):
        raise SpecError(f"{path}: missing the [analysis] table (kind, data, model, out)")
    kind = head.get("kind")
    if kind not in ANALYSIS_KINDS:
        raise SpecError(f"{path}: [analysis] 'kind' must be one of {list(ANALYSIS_KINDS)}; got {kind!r}")
    for key in _REQUIRED[kind]:
        if not isinstance(head.get(key), str) or not head[key]:
            raise SpecError(f"{path}: [analysis] needs {key!r} (a name or path)")
    if kind == "safety":
        files = head.get("data")
        if not isinstance(files, list) or not files or not all(isinstance(f, str) and f for f in files):
            raise SpecError(f"{path}: [analysis] needs 'data', a list of benchmark files or dataset names")
    declared = _tables(kind)
    tables = {"analysis", kind, *declared}
    unknown = set(raw) - tables
    if unknown:
        first = sorted(unknown)[0]
        raise SpecError(f"{path}: unknown table(s) {sorted(unknown)}{did_you_mean(first, tables)}; "
                        f"allowed: {sorted(tables)}")
    for name in tables - {"analysis"}:
        if not isinstance(raw.get(name, {}), dict):
            raise SpecError(f"{path}: {name!r} must be a table ([{name}] with its options); got {raw[name]!r}")
    checked = {name: _check_table(path, name, raw.get(name, {}), allowed) for name, allowed in declared.items()}
    if kind == "audit" and (head["data"] == SIMULATED) != bool(checked["simulate"]):
        raise SpecError(f"{path}: generated data need data = {SIMULATED!r} together with a [simulate] table")
    options = checked.get(kind, raw.get(kind, {}))
    if kind == "safety":
        for key in options:
            if key not in ("steps", *SAFETY_STEPS):
                raise SpecError(f"{path}: [safety] unknown option {key!r}{did_you_mean(key, SAFETY_STEPS)}; allowed: "
                                f"{sorted(('steps', *SAFETY_STEPS))}")
        check_step_options(options.get("steps", list(DEFAULT_STEPS)),
                           {k: v for k, v in options.items() if k != "steps"}, where=str(path))
    return {"path": path, **head, "options": options, "simulate": checked.get("simulate", {}),
            "read": checked.get("read", {})}


def _check_table(path: Path, table: str, options: dict, allowed: dict[str, Option]) -> dict:
    """The table's options, each checked against its declaration (lists become tuples), and the
    rules across options of the job or function behind the table (old names of renamed options
    taken with a warning)."""
    declared = {**_JOBS, "simulate": simulate_dif_benchmark}.get(table)
    where = f"{path}: [{table}]"
    if declared is not None:
        options = renamed_options(declared, options, caller=table, where=where)
    for key in options:
        if key not in allowed:
            raise SpecError(f"{path}: [{table}] unknown option {key!r}{did_you_mean(key, allowed)}; "
                            f"allowed: {sorted(allowed)}")
    if declared is None:  # [read]: the reading options of load
        return {key: allowed[key].check(value, caller="load", where=where) for key, value in options.items()}
    return check_options(declared, options, caller=table if table in _JOBS else declared.__name__, where=where,
                         strict=True)


def run_analysis(path: str | Path, *, force: bool = False, resume: bool = False, progress: bool = True) -> Path:
    """Run a declared analysis end to end; returns its output folder.

    ``resume``: a safety analysis reruns only its missing and failed steps, with the settings its
    summary.json recorded (:func:`~bayesirt.jobs.suite.run_safety_suite`); a fit or audit is
    written whole or not at all, so an existing output folder is returned as it is and a missing
    one is computed."""
    analysis = load_analysis(path)
    options = dict(analysis["options"])
    if resume and analysis["kind"] != "safety" and Path(analysis["out"]).is_dir():
        return Path(analysis["out"])
    if analysis["kind"] == "safety":
        steps = options.pop("steps", list(DEFAULT_STEPS))
        return run_safety_suite(analysis["data"], analysis["out"], steps=steps, options=options, force=force,
                                resume=resume, progress=progress)
    data = analysis["data"]
    if data == SIMULATED:
        data, _ = simulate_dif_benchmark(**analysis["simulate"])
    else:
        data = load(data, **analysis["read"])
    if analysis["kind"] == "audit":
        return call(run_audit_job, data, analysis["out"], force=force, progress=progress, **options)
    return run_fit_job(data, analysis["out"], spec=analysis["model"], force=force, progress=progress, **options)
