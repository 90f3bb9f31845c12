"""Options declared once, beside the function they configure.

A job (or :func:`bayesirt.fit`, or a settings dataclass such as ``AuditConfig``) declares each keyword
option as the default of its parameter::

    @declare()
    def run_cat_job(data, out, *, splits=option(20, "random calibration/test splits of the models"), ...):

:func:`declare` replaces every :class:`Option` default by its plain value (Python callers see
``splits=20``) and records the declarations, which :func:`options_of` returns. The command line
(:mod:`bayesirt.cli.parser`) and the checks of analysis files (:mod:`bayesirt.jobs.analysis`) are
generated from them, so the three agree by construction; ``tests/test_architecture.py`` checks that
every option is reachable everywhere unless its declaration says why not (``cli=`` / ``toml=``).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from bayesirt.errors import ConfigError, did_you_mean, warn
from bayesirt.utils.validation import parameter_error

__all__ = ["Option", "option", "option_table", "declare", "check_options", "renamed_options", "renamed_of", "accept_renamed", "deprecated", "options_of", "positional_of", "call", "STANDARD", "comma_list",
           "comma_ints", "comma_floats", "names_or_assignments", "none_or_float", "none_or_int", "none_or_text", "assignments", "polarity_flags"]

#: Keyword parameters every job handles the same way; the command line gives them fixed flags
#: (``--out``, ``--force``, ``--no-progress``) and analysis files set them in ``[analysis]`` or not at all.
STANDARD = ("out", "force", "progress")


@dataclass(frozen=True)
class Option:
    """The declaration of one keyword option.

    ``default`` is the Python default; ``help`` one line for ``--help``; ``type`` the value type
    (inferred from ``default``: for tuples the element type of its first value; give it when the
    default is None); ``choices`` the allowed values; ``parse`` turns the command-line text into the
    value (comma lists, ``NAME=VALUE``); ``flag`` the command-line flag when it is not
    ``--name-with-dashes``; ``repeat`` a flag given once per value (collected, then ``parse`` of the
    list); ``low`` / ``high`` the range of a number (of every number of a tuple), exclusive with
    ``open`` (True: both ends; "low" or "high": that end); ``hints`` what to say of a value that is
    not a choice (``{"map": "use ..."}``); ``renamed`` old spellings of choices, still accepted for one
    release with a warning (``{"map": "joint_map"}``); ``required`` an option without a usable default (the job refuses None); ``cli`` / ``toml`` why the option cannot be given on the command line / in an
    analysis file (None: it can)."""

    default: Any
    help: str
    type: type | None = None
    choices: tuple | None = None
    parse: Callable[[Any], Any] | None = None
    flag: str | None = None
    metavar: str | None = None
    repeat: bool = False
    required: bool = False
    low: float | None = None
    high: float | None = None
    open: bool = False
    cli: str | None = None
    toml: str | None = None
    hints: Mapping[Any, str] | None = None
    renamed: Mapping[Any, Any] | None = None
    name: str = ""

    @property
    def value_type(self) -> type:
        if self.type is not None:
            return self.type
        if isinstance(self.default, (tuple, list)):
            return tuple
        if self.default is None:
            raise TypeError(f"option {self.name!r}: a None default needs type=")
        return type(self.default)

    @property
    def cli_flag(self) -> str:
        if self.flag:
            return self.flag
        dashed = self.name.replace("_", "-")
        return f"--no-{dashed}" if self.value_type is bool and self.default is True else f"--{dashed}"

    @property
    def nullable(self) -> bool:
        """None is a value of the option (its default, or a flag that reads ``none``)."""
        return self.default is None or self.parse in (none_or_float, none_or_int, none_or_text)

    def check(self, value, *, caller: str, where: str = "", strict: bool = True):
        """``value`` checked against the declared type, choices and range: the value (lists as tuples
        for tuple options, integers as floats for float options), or a :class:`ConfigError` in the one
        message form, ``where`` (an analysis file and table) before it. ``strict`` (analysis files,
        the command line) checks every type; Python calls (``strict=False``) check numbers, booleans,
        choices and ranges and leave the other types to duck typing."""
        if value is None and self.nullable:
            return None
        if self.renamed and isinstance(value, str) and value in self.renamed:
            deprecated(f"{where + ' ' if where else ''}{caller}: {self.name}={value!r} is now {self.renamed[value]!r}")
            value = self.renamed[value]
        want, numbers, given = self.value_type, [value], value

        def fail(what: str, hint: str = ""):
            raise parameter_error(self.name, caller, what + (" or None" if self.nullable else ""), given,
                                  hint=hint, where=where)

        if want is tuple:
            if not strict and _is_number(value, integer=self.element_type is int):  # one number for a list of them
                value = (value,)
            if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__") or not len(value):
                if strict or self.low is not None or self.high is not None:
                    fail(self.range_text() if self.low is not None or self.high is not None else "a non-empty list")
                return value
            numbers = list(value)
            value = tuple(value) if isinstance(value, list) else value
        elif want is bool:
            if not isinstance(value, (bool, np.bool_)):
                fail("True or False")
            value = bool(value)
        elif want in (int, float):
            if not _is_number(value, integer=want is int):
                fail(self.range_text() if self.low is not None or self.high is not None else
                     "an integer" if want is int else "a number")
            value = want(value)
        elif strict and want is not object and not isinstance(value, want):
            fail({str: "a string", dict: "a table"}.get(want, f"of type {want.__name__}"))
        if self.choices is not None:
            for v in numbers:
                if isinstance(v, (list, dict, set)) or v not in self.choices:
                    hint = (self.hints or {}).get(v) if not isinstance(v, (list, dict, set)) else None
                    fail("one of {" + ", ".join(repr(c) for c in self.choices) + "}",
                         f" ({hint})" if hint else did_you_mean(str(v), self.choices))
        if self.low is not None or self.high is not None:
            if not all(_is_number(v, integer=self.element_type is int) for v in numbers):
                fail(self.range_text())
            low_open, high_open = self.open in (True, "low"), self.open in (True, "high")
            below = self.low is not None and any(v <= self.low if low_open else v < self.low for v in numbers)
            above = self.high is not None and any(v >= self.high if high_open else v > self.high for v in numbers)
            if below or above:
                fail(self.range_text())
        return value

    @property
    def element_type(self) -> type:
        """The type of the option's value, or of each value of a tuple option."""
        if self.value_type is not tuple:
            return self.value_type
        if isinstance(self.default, (tuple, list)) and self.default:
            return type(self.default[0])
        return {comma_list: str, comma_ints: int}.get(self.parse, float)

    def range_text(self) -> str:
        """What the type and range ask for: "a positive integer", "a number in (0, 1]", "a list of
        integers >= 2", ..."""
        integer, plural = self.element_type is int, self.value_type is tuple
        low_open, high_open = self.open in (True, "low"), self.open in (True, "high")
        noun = ("integers" if integer else "numbers") if plural else ("an integer" if integer else "a number")
        kind = {(0, False): "non-negative", (0, True): "positive"}.get((self.low, low_open))
        if integer and (self.low, low_open) == (1, False):
            kind = "positive"
        if self.high is None and kind:
            noun = noun.split()[-1]
            return f"a list of {kind} {noun}" if plural else f"a {kind} {noun}"
        if self.low is not None and self.high is not None:
            span = f"in {'(' if low_open else '['}{self.low:g}, {self.high:g}{')' if high_open else ']'}"
        elif self.low is not None:
            span = f"{'>' if low_open else '>='} {self.low:g}"
        else:
            span = f"{'<' if high_open else '<='} {self.high:g}"
        return f"a list of {noun} {span}" if plural else f"{noun} {span}"


def _is_number(value, *, integer: bool) -> bool:
    """A finite real number (an integer when ``integer``), not a bool."""
    if isinstance(value, (bool, np.bool_)):
        return False
    if integer:
        return isinstance(value, (int, np.integer))
    return isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)


def option(default, help: str, **declaration) -> Any:
    """An :class:`Option` as a parameter default (typed ``Any`` so signatures read naturally)."""
    return Option(default, help, **declaration)


def option_table(**options: Option) -> dict[str, Option]:
    """Named declarations of options that are not parameters of one function (the reading options
    that :func:`bayesirt.data.load` passes to the readers)."""
    return {name: replace(opt, name=name) for name, opt in options.items()}


#: True while a declared function runs: the calls it makes of other declared functions (or settings
#: dataclasses) pass their own values, already checked, and skip the check (as scikit-learn's
#: ``validate_params`` skips nested validation).
_INSIDE: ContextVar[bool] = ContextVar("bayesirt_declared_call", default=False)


def deprecated(what: str) -> None:
    """Warn that an old spelling was used: ``what`` names the old and the new one."""
    warn(f"{what}; the old spelling goes in the next release", FutureWarning)


def declare(*, forward: Callable | None = None, expand: Mapping[str, type] | None = None,
            positional: Mapping[str, str] | None = None, check: Callable[[dict], str | None] | None = None,
            renamed: Mapping[str, str] | None = None):
    """Decorator of a function or a dataclass (applied before ``@dataclass``) whose option defaults
    are :class:`Option` declarations; every call from outside declared code is checked against them
    (:func:`check_options`) before the body runs.

    ``forward``: a declared function whose options this one passes on through ``**kwargs`` (e.g.
    :func:`bayesirt.fit`), so they are its options too. ``expand``: ``{parameter: declared
    dataclass}``: the dataclass's fields are options of this function, collected into that parameter
    (e.g. ``config: AuditConfig``). ``positional``: help of the positional parameters (command-line
    arguments). ``check``: a rule across options: called with ``{name: value}`` of every option
    (defaults filled in), it returns None or what is wrong (one sentence, said after the caller's name),
    or raises the :class:`ConfigError` of one option itself. ``renamed``: ``{old: new}`` option
    names still accepted for one release with a warning (keyword, flag and analysis-file key)."""

    def wrap(obj):
        declared: dict[str, Option] = {}
        if inspect.isclass(obj):
            for name, value in list(vars(obj).items()):
                if isinstance(value, Option):
                    declared[name] = replace(value, name=name)
                    setattr(obj, name, value.default)
        else:
            defaults = dict(obj.__kwdefaults__ or {})
            for name, value in defaults.items():
                if isinstance(value, Option):
                    declared[name] = replace(value, name=name)
                    defaults[name] = value.default
            obj.__kwdefaults__ = defaults or None
            undeclared = sorted(set(defaults) - set(declared) - set(STANDARD) - set(expand or {}))
            if undeclared:
                raise TypeError(f"{obj.__qualname__}: keyword parameter(s) {undeclared} are not declared options")
        sources = {"forward": forward, "expand": dict(expand or {}), "positional": dict(positional or {}),
                   "check": check, "renamed": dict(renamed or {})}
        checked = _checked_class(obj) if inspect.isclass(obj) else _checked_function(obj)
        checked.__options__ = declared
        checked.__option_sources__ = sources
        return checked

    return wrap


def _checked_function(func):
    """``func`` behind a check of its keyword options (the values given; defaults are declared valid)."""

    @functools.wraps(func)
    def checked(*args, **kwargs):
        if _INSIDE.get():
            return func(*args, **kwargs)
        if kwargs or checked.__option_sources__["check"] is not None:
            if renamed_of(checked):
                kwargs = renamed_options(checked, kwargs, caller=func.__name__)
            given = check_options(checked, kwargs, caller=func.__name__)
            kwargs |= {k: v for k, v in given.items() if isinstance(kwargs[k], str) and v != kwargs[k]}  # renamed values
        token = _INSIDE.set(True)
        try:
            return func(*args, **kwargs)
        finally:
            _INSIDE.reset(token)

    checked.__kwdefaults__ = func.__kwdefaults__
    return checked


def _checked_class(cls):
    """``cls`` whose ``__post_init__`` (run by ``@dataclass`` after ``__init__``) first checks every
    declared field."""
    own = vars(cls).get("__post_init__")

    def __post_init__(self):
        if not _INSIDE.get():
            check_options(cls, {name: getattr(self, name) for name in cls.__options__}, caller=cls.__name__)
        if own is not None:
            own(self)

    cls.__post_init__ = __post_init__
    return cls


def renamed_options(obj, values: Mapping[str, Any], *, caller: str, where: str = "") -> dict:
    """``values`` with the old names of ``obj``'s renamed options replaced by the new ones (with a
    warning naming both)."""
    out = dict(values)
    for old, new in renamed_of(obj).items():
        if old in out:
            deprecated(f"{where + ' ' if where else ''}{caller}: option {old!r} is now {new!r}")
            out[new] = out.pop(old)
    return out


def renamed_of(obj) -> dict[str, str]:
    """``{old: new}`` option names of ``obj``: its own renamed options, those of the dataclasses it
    expands and those of the function it forwards to."""
    sources = obj.__option_sources__
    out: dict[str, str] = {}
    if sources["forward"] is not None:
        out.update(renamed_of(sources["forward"]))
    for cls in sources["expand"].values():
        out.update(renamed_of(cls))
    out.update(sources["renamed"])
    return out


def accept_renamed(cls):
    """Decorator of a declared dataclass, applied above ``@dataclass``: its constructor takes the old
    names of its renamed options for one release (with the warning :func:`renamed_options` gives)."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **renamed_options(cls, kwargs, caller=cls.__name__))

    cls.__init__ = __init__
    return cls


def check_options(obj, values: Mapping[str, Any], *, caller: str, where: str = "", strict: bool = False) -> dict:
    """``values`` (``{option: value}``, given to the declared ``obj`` by ``caller``: a function, a
    command or an analysis-file table) checked against ``obj``'s declarations and its ``check``
    rule; the checked values (:meth:`Option.check`), or the :class:`ConfigError` of the first that
    is not allowed. Names that are not options (positional arguments) pass unchecked."""
    declared, defaults, rules = _compiled(obj)
    out = dict(values)
    for name, value in values.items():
        opt = declared.get(name)
        if opt is not None and (value is not opt.default or strict):
            out[name] = opt.check(value, caller=caller, where=where, strict=strict)
    for rule in rules:
        problem = rule(defaults | out)
        if problem:
            raise ConfigError(f"{where + ' ' if where else ''}{caller}: {problem}")
    return out


def _compiled(obj) -> tuple[dict[str, Option], dict[str, Any], list[Callable]]:
    """``obj``'s options, their defaults and its rules, worked out on its first check (the per-call
    cost of a check is then a dictionary look-up per value given)."""
    cached = obj.__dict__.get("__option_checks__")
    if cached is None:
        declared, sources = options_of(obj), obj.__option_sources__
        rules = [sources["check"], *(cls.__option_sources__["check"] for cls in sources["expand"].values()),
                 sources["forward"] and sources["forward"].__option_sources__["check"]]
        cached = (declared, {name: opt.default for name, opt in declared.items()}, [r for r in rules if r])
        setattr(obj, "__option_checks__", cached)
    return cached


def options_of(obj) -> dict[str, Option]:
    """Every option of a declared function or dataclass: its own, those of the dataclasses it expands
    and those of the function it forwards to (its own declarations win)."""
    if not hasattr(obj, "__options__"):
        raise TypeError(f"{getattr(obj, '__qualname__', obj)!r} has no declared options (decorate it with declare)")
    sources = obj.__option_sources__
    out: dict[str, Option] = {}
    if sources["forward"] is not None:
        out.update(options_of(sources["forward"]))
    for cls in sources["expand"].values():
        out.update(options_of(cls))
    out.update(obj.__options__)
    return out


def call(func, *args, **options):
    """``func(*args, **options)``, the options of each dataclass ``func`` expands collected into an
    instance of it (``run_audit_job(data, out, seed=1)`` -> ``config=AuditConfig(seed=1)``)."""
    for param, cls in func.__option_sources__["expand"].items():
        fields = {name: options.pop(name) for name in list(options) if name in options_of(cls)}
        if fields:
            options[param] = cls(**fields)
    return func(*args, **options)


def positional_of(obj) -> dict[str, str]:
    """``{name: help}`` of a declared function's positional parameters, in signature order."""
    helps = obj.__option_sources__["positional"]
    params = inspect.signature(obj).parameters.values()
    return {p.name: helps.get(p.name, "") for p in params
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in STANDARD}


def _comma(text, convert, what: str, example: str) -> tuple:
    """``"a,b"`` -> ``(convert(a), convert(b))``; a ValueError naming ``what`` and ``example`` otherwise."""
    try:
        values = tuple(convert(t.strip()) for t in str(text).split(",") if t.strip())
    except ValueError:
        values = ()
    if not values:
        raise ValueError(f"expected comma-separated {what}, e.g. {example}; got {text!r}")
    return values


def comma_list(text: str) -> tuple[str, ...]:
    """``"a,b"`` -> ``("a", "b")``."""
    return _comma(text, str, "names", "rasch,2pl")


def comma_ints(text: str) -> tuple[int, ...]:
    """``"1,2,3"`` -> ``(1, 2, 3)`` (their range is the option's ``low``)."""
    return _comma(text, int, "integers", "1,2,3")


def comma_floats(text: str) -> tuple[float, ...]:
    """``"0.25,0.5"`` -> ``(0.25, 0.5)``."""
    return _comma(text, float, "numbers", "0.25,0.5")


def names_or_assignments(items: list[str]) -> str | list[str]:
    """A repeatable ``[KEY=]NAME`` flag: one plain name as it is, else the list (``["arc=acc_norm", ...]``)."""
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 and "=" not in items[0] else items


def none_or_float(text: str) -> float | None:
    """``"none"`` (any case) -> None, else a number (a prior that can be switched off)."""
    if str(text).strip().lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"expected a number or none; got {text!r}") from None


def none_or_int(text: str) -> int | None:
    """``"none"`` (any case) -> None, else an integer (a count whose None means "the library's default")."""
    if str(text).strip().lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"expected an integer or none; got {text!r}") from None


def none_or_text(text: str) -> str | None:
    """``"none"`` (any case) -> None, anything else as given (a spec that can be switched off)."""
    return None if str(text).strip().lower() == "none" else str(text)


def polarity_flags(items: list[str]) -> dict:
    """Repeatable ``NAME=-1`` / ``NAME=1`` / ``auto`` flags -> ``{"NAME": -1, ..., "auto": True}``."""
    auto = [i for i in items if str(i).strip().lower() == "auto"]
    declared = assignments([i for i in items if str(i).strip().lower() != "auto"])
    return declared | ({"auto": True} if auto else {})


def assignments(items: list[str]) -> dict[str, int]:
    """``["orbench=-1", ...]`` -> ``{"orbench": -1}`` (a repeatable ``NAME=+1|-1`` flag)."""
    out = {}
    for item in items:
        name, _, value = str(item).partition("=")
        if not name.strip() or value.strip() not in ("1", "-1", "+1"):
            raise ValueError(f"{item!r}: write NAME=-1 (or =1), the benchmark named by its file stem")
        out[name.strip()] = int(value)
    return out
