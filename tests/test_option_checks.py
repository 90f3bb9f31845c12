"""Every declared option of every command refuses a value just outside each of its bounds and
choices, in the one message form, on the command line, in an analysis file and in Python, before
any data is read or any work starts (bayesirt.utils.options.declare)."""

from __future__ import annotations

import importlib
import re

import pytest

import bayesirt
from bayesirt.cli.main import main
from bayesirt.cli.parser import COMMANDS, command_job
from bayesirt.utils.options import Option, call, declare, option, options_of, positional_of

#: Where reading would fail loudly: a path that does not exist.
MISSING = "/nonexistent/bayesirt-data.csv"


class Untouchable:
    """A positional argument whose use would be seen: any attribute, item or iteration fails."""

    def __getattr__(self, name):
        raise AssertionError(f"the data were touched ({name}) before the options were checked")

    def __iter__(self):
        raise AssertionError("the data were iterated before the options were checked")


def outside(opt: Option) -> list:
    """Values just outside each choice list and bound of ``opt`` (as Python values)."""
    element = opt.element_type
    wrap = (lambda v: (v,)) if opt.value_type is tuple else (lambda v: v)
    low_open, high_open = opt.open in (True, "low"), opt.open in (True, "high")
    step = 1 if element is int else 0.01
    values = []
    if opt.choices:
        values.append(wrap(f"{opt.choices[0]}_x"))
    if opt.low is not None:
        values.append(wrap(opt.low if low_open else opt.low - step))
    if opt.high is not None:
        values.append(wrap(opt.high if high_open else opt.high + step))
    return values


def _cases():
    for command in sorted(COMMANDS):
        for name, opt in options_of(command_job(command)).items():
            if opt.value_type is not bool and not opt.repeat:
                for value in outside(opt):
                    yield pytest.param(command, name, value, id=f"{command}-{name}-{value!r}")


CASES = list(_cases())


def _message(name: str, caller: str) -> str:
    return rf"The '{name}' parameter of {re.escape(caller)} must be .+; got .+\.$"


def test_every_numeric_option_declares_a_range_and_the_walk_is_not_empty():
    assert len(CASES) > 100
    for command in COMMANDS:
        for name, opt in options_of(command_job(command)).items():
            if opt.value_type in (int, float) or (opt.value_type is tuple and opt.element_type in (int, float)):
                assert opt.low is not None or opt.high is not None, f"{command}: {name} declares no range"


@pytest.mark.parametrize("command, name, value", CASES)
def test_a_value_outside_is_refused_on_the_command_line(command, name, value, tmp_path, capsys):
    opt = options_of(command_job(command))[name]
    if opt.cli is not None:
        pytest.skip(f"not a flag: {opt.cli}")
    text = ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
    positional = [MISSING for _ in positional_of(command_job(command))]
    required = [f"{o.cli_flag}=1" for n, o in options_of(command_job(command)).items()
                if o.required and n != name]
    assert main([command, *positional, f"{opt.cli_flag}={text}", *required, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert re.match(r"^bayesirt: error: " + _message(name, command), err), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command, name, value", CASES)
def test_a_value_outside_is_refused_in_python(command, name, value, tmp_path):
    job = command_job(command)
    in_config = [cls.__name__ for cls in job.__option_sources__["expand"].values() if name in options_of(cls)]
    positional = [Untouchable() for _ in positional_of(job)]
    with pytest.raises(bayesirt.ConfigError, match=_message(name, in_config[0] if in_config else job.__name__)):
        call(job, *positional, out=tmp_path / "out", **{name: value})
    assert not (tmp_path / "out").exists()


def _file_cases():
    from bayesirt.jobs.analysis import table_options
    from bayesirt.jobs.suite import SAFETY_STEPS, _step_declarations

    tables = [("fit", "fit", table_options("fit")), ("audit", "audit", table_options("audit"))]
    tables += [("safety", f"safety.{step}", _step_declarations(step)) for step in SAFETY_STEPS]
    for kind, table, declared in tables:
        for name, opt in declared.items():
            if opt.value_type is not bool and not opt.repeat:
                for value in outside(opt):
                    yield pytest.param(kind, table, name, value, id=f"{table}-{name}-{value!r}")


def _toml(value) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return f'"{value}"' if isinstance(value, str) else repr(value)


@pytest.mark.parametrize("kind, table, name, value", list(_file_cases()))
def test_a_value_outside_is_refused_in_an_analysis_file(kind, table, name, value, tmp_path):
    from bayesirt.jobs.analysis import run_analysis

    head = {"fit": f'data = "{MISSING}"\nmodel = "2pl"', "audit": f'data = "{MISSING}"',
            "safety": f'data = ["{MISSING}"]'}[kind]
    path = tmp_path / "a.toml"
    path.write_text(f'[analysis]\nkind = "{kind}"\n{head}\nout = "{tmp_path / "out"}"\n[{table}]\n{name} = '
                    f"{_toml(value)}\n")
    caller = table.removeprefix("safety.")
    with pytest.raises(bayesirt.ConfigError, match="^" + re.escape(f"{path}: [{table}] ") + _message(name, caller)):
        run_analysis(path)
    assert not (tmp_path / "out").exists()


def test_rules_across_options_and_nested_calls():
    seen = []

    @declare(check=lambda v: "low must not exceed high" if v["low"] > v["high"] else None)
    def inner(*, low=option(0, "low", low=0), high=option(1, "high", low=0)):
        seen.append((low, high))
        return low

    @declare()
    def outer(*, n=option(1, "n", low=1)):
        return inner(low=-n)  # a call from declared code is not checked again

    assert inner(high=2) == 0 and outer(n=3) == -3
    with pytest.raises(bayesirt.ConfigError, match=r"^inner: low must not exceed high$"):
        inner(low=2)
    with pytest.raises(bayesirt.ConfigError, match=r"^The 'low' parameter of inner must be a non-negative integer; "
                                                   r"got -1\.$"):
        inner(low=-1)
    with pytest.raises(bayesirt.ConfigError, match=r"^The 'n' parameter of outer must be a positive integer; got "
                                                   r"1\.5\.$"):
        outer(n=1.5)
    assert seen == [(0, 2), (-3, 1)]


def test_a_mistyped_or_abbreviated_flag_names_the_closest_one(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["select", MISSING, "--budjet", "50", "--out", str(tmp_path / "o")])
    assert exit_.value.code == 2
    assert "unrecognized argument --budjet (did you mean --budget?)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fit", MISSING, "--meth", "advi", "--out", str(tmp_path / "o")])  # no abbreviations
    assert "unrecognized argument --meth (did you mean --method?)" in capsys.readouterr().err


@pytest.mark.parametrize("module, function, positional, name, value", [
    ("bayesirt.audit.engine.bootstrap", "composition_bootstrap", 1, "replicates", 0),
    ("bayesirt.audit.engine.resampling", "matched_random_controls", 1, "epsilon", -1),
    ("bayesirt.utils.parallel", "parallel_map", 2, "workers", 0),
    ("bayesirt.workflow.sbc", "simulation_based_calibration", 1, "replicates", 0),
], ids=lambda v: v if isinstance(v, str) and "." not in v else None)
def test_the_issues_examples_are_config_errors_in_the_one_form(module, function, positional, name, value):
    """The calls issue 41 found raising the bare base class: each is a bayesirt.ConfigError in the
    one message form, before its data are touched."""
    func = getattr(importlib.import_module(module), function)
    with pytest.raises(bayesirt.ConfigError, match=_message(name, function)) as err:
        func(*[Untouchable()] * positional, **{name: value})
    assert type(err.value) is bayesirt.ConfigError


def _mml_cases():
    from bayesirt.frequentist import fit_mml, fit_mml_mirt

    for func in (fit_mml, fit_mml_mirt):
        for name, opt in options_of(func).items():
            if opt.value_type is not bool:
                for value in outside(opt):
                    yield pytest.param(func, name, value, id=f"{func.__name__}-{name}-{value!r}")


@pytest.mark.parametrize("func, name, value", list(_mml_cases()))
def test_the_mml_fits_refuse_a_value_outside_before_touching_the_data(func, name, value):
    positional = (Untouchable(), 2) if func.__name__ == "fit_mml_mirt" else (Untouchable(),)
    with pytest.raises(bayesirt.ConfigError, match=_message(name, func.__name__)):
        func(*positional, **{name: value})


def test_fit_mml_refuses_bad_iteration_grid_tolerance_and_ability_settings():
    from bayesirt.frequentist import fit_mml

    assert len(list(_mml_cases())) >= 15
    for bad in ({"max_iter": 0}, {"quadrature": 1}, {"tol": -1}, {"theta_method": "x"}):
        with pytest.raises(bayesirt.ConfigError, match=_message(next(iter(bad)), "fit_mml")):
            fit_mml(Untouchable(), **bad)
