"""The package's shape, read from its source with ``ast``: no import cycles, lower layers never import
higher ones, no module takes another module's private names, modules stay short, and every lazily
exported public name resolves."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "bayesirt"
#: Layer of each top-level part of the package; a module may import only its own layer or lower ones.
LAYERS = {"errors": 0, "utils": 0, "data": 1, "models": 2, "inference": 3, "workflow": 4, "comparison": 4,
          "frequentist": 4, "structure": 4, "audit": 4, "safety": 4, "report": 5, "jobs": 6, "cli": 7, "__main__": 8}
#: Layer of each subpackage of ``audit``: the ability adjustments, the deterministic near-tie engine, its
#: diagnostics, the Bayesian layer; the pipelines at the audit's top level (``primary``, ``robustness``,
#: ``output``, ...) are above all four.
AUDIT_LAYERS = {"adjustment": 0, "engine": 1, "diagnostics": 2, "bayes": 3}
MAX_LINES = 500
REASON = "longer than 500 lines because"


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports(name: str, path: Path):
    """(target module, imported name or None, line) of every import of a bayesirt module in ``path``,
    inside functions too; the lazy declarations under ``if TYPE_CHECKING:`` are not imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for node in ast.walk(tree) if _is_type_checking(node) for n in ast.walk(node)}
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "bayesirt":
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] != "bayesirt":
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (full, None, node.lineno) if full in MODULES else (base, alias.name, node.lineno)


def _owner(target: str) -> str:
    while target not in MODULES and "." in target:
        target = target.rsplit(".", 1)[0]
    return target


EDGES = {name: sorted({(_owner(t), n, line) for t, n, line in _imports(name, path)}, key=lambda e: (e[0], e[1] or "", e[2]))
         for name, path in MODULES.items()}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    graph = {m: {t for t, _, _ in edges if t != m} for m, edges in EDGES.items()}
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _upward(edges, layer) -> list[str]:
    """Every import of a module of a higher ``layer`` (a function of the module name, None outside it)."""
    return [f"{m} (layer {layer(m)}) imports {t} (layer {layer(t)}) at line {line}"
            for m, found in edges.items() for t, _, line in found
            if layer(m) is not None and layer(t) is not None and layer(t) > layer(m)]


def test_lower_layers_never_import_higher_ones():
    assert _upward(EDGES, _layer) == []


def _audit_layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[:2] != ["bayesirt", "audit"] or len(parts) < 3:
        return None
    return AUDIT_LAYERS.get(parts[2], len(AUDIT_LAYERS))


def test_audit_layers_never_import_higher_ones():
    """The deterministic engine never imports the diagnostics or the Bayesian layer, the diagnostics
    never import the Bayesian layer, and no subpackage imports the pipelines above them."""
    assert _audit_layer("bayesirt.audit.engine.dif") == 1 and _audit_layer("bayesirt.audit.primary") == 4
    assert _upward(EDGES, _audit_layer) == []


def test_every_audit_subpackage_has_a_layer():
    audit = ROOT / "audit"
    assert {p.name for p in audit.iterdir() if (p / "__init__.py").is_file()} == set(AUDIT_LAYERS)


def test_upward_finder_finds_an_upward_import():
    edges = {"bayesirt.audit.engine.anchors": [("bayesirt.audit.bayes.posterior", None, 7)],
             "bayesirt.audit.bayes.posterior": [("bayesirt.audit.engine.dif", None, 3)]}
    assert _upward(edges, _audit_layer) == [
        "bayesirt.audit.engine.anchors (layer 1) imports bayesirt.audit.bayes.posterior (layer 3) at line 7"]


def test_no_module_imports_another_modules_private_names():
    private = [f"{m} imports {name} from {t} at line {line}" for m, edges in EDGES.items() for t, name, line in edges
               if name and name.startswith("_") and not name.startswith("__") and t != m]
    assert private == []


def test_every_part_of_the_package_has_a_layer():
    top = {p.stem if p.is_file() else p.name for p in ROOT.iterdir() if p.name != "__pycache__" and not p.name.startswith(".")}
    assert top - {"__init__"} == set(LAYERS)
    assert len(top) <= 16


def test_modules_stay_short_or_say_why():
    long = [f"{m}: {n} lines" for m, path in MODULES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
            and REASON not in path.read_text(encoding="utf-8")[:3000].lower()]
    assert long == []


@pytest.mark.parametrize("package", sorted(m for m, p in MODULES.items() if p.name == "__init__.py"))
def test_every_public_name_resolves(package):
    module = importlib.import_module(package)
    assert module.__doc__, f"{package} has no docstring saying what it is for"
    submodules = {m.rsplit(".", 1)[1] for m in MODULES if "." in m and m.rsplit(".", 1)[0] == package}
    # a public name equal to a submodule's is replaced by the submodule once that is imported
    assert not submodules & set(getattr(module, "__all__", [])), f"{package} exports names of its submodules"
    for name in getattr(module, "__all__", []):
        assert getattr(module, name) is not None


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_no_two_subpackages_import_each_other():
    pairs = {(_part(m), _part(t)) for m, edges in EDGES.items() for t, _, _ in edges if _part(m) != _part(t)}
    assert sorted({tuple(sorted(p)) for p in pairs if p[::-1] in pairs}) == []


def test_mutual_pair_finder_finds_one():
    edges = {"bayesirt.a.x": [("bayesirt.b.y", None, 1)], "bayesirt.b.y": [("bayesirt.a.z", None, 3)]}
    pairs = {(_part(m), _part(t)) for m, e in edges.items() for t, _, _ in e}
    assert {tuple(sorted(p)) for p in pairs if p[::-1] in pairs} == {("a", "b")}


def test_analyses_never_import_report_or_jobs():
    analyses = {"workflow", "comparison", "frequentist", "structure", "audit", "safety"}
    upward = [f"{m} imports {t} at line {line}" for m, edges in EDGES.items() for t, _, line in edges
              if _part(m) in analyses and _part(t) in ("report", "jobs", "cli")]
    assert upward == []


def _function_imports(path: Path):
    """(line, text of the line and the one above) of every bayesirt import inside a function."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)) and (
                        (isinstance(inner, ast.ImportFrom) and (inner.level or (inner.module or "").startswith("bayesirt")))
                        or (isinstance(inner, ast.Import) and any(a.name.startswith("bayesirt") for a in inner.names))):
                    yield inner.lineno, lines[inner.lineno - 2] + "\n" + lines[inner.lineno - 1]


def test_an_import_inside_a_function_says_why():
    """Imports inside functions are for import time (PyMC, the data layer behind --help) or optional
    dependencies, and each says so in a comment on its line or the line above."""
    silent = [f"{m}:{line}" for m, path in MODULES.items() for line, text in _function_imports(path) if "#" not in text]
    assert silent == []


def _python_default(job, name):
    """The default Python callers get for option ``name`` of ``job`` (its signature, the dataclass it
    expands or the function it forwards to)."""
    import dataclasses
    import inspect

    parameters = inspect.signature(job).parameters
    if name in parameters and parameters[name].default is not inspect.Parameter.empty:
        return parameters[name].default
    sources = job.__option_sources__
    for cls in sources["expand"].values():
        fields = {f.name: f.default for f in dataclasses.fields(cls)}
        if name in fields:
            return fields[name]
    assert sources["forward"] is not None, f"{job.__name__} does not take option {name!r}"
    return _python_default(sources["forward"], name)


def _command_names():
    from bayesirt.cli.parser import COMMANDS

    return sorted(COMMANDS)


@pytest.mark.parametrize("command", _command_names())
def test_cli_analysis_files_and_python_accept_the_same_options(command):
    """Every declared option of a command's job is a flag (unless its declaration says why not) whose
    value reaches the job, with the default Python callers get; no flag is parsed and ignored."""
    import argparse

    from bayesirt.cli.parser import build_parser, command_job
    from bayesirt.data.io import READ_OPTIONS
    from bayesirt.utils.options import STANDARD, options_of, positional_of

    job = command_job(command)
    parser = build_parser((command,))
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    flags = {a.dest: a for a in sub._actions if a.dest != "help" and a.help != argparse.SUPPRESS}  # not old names
    declared = options_of(job)
    for name, opt in declared.items():
        assert _python_default(job, name) == opt.default, f"{command} --{name}: declaration and Python disagree"
        if opt.cli is None:
            assert name in flags, f"{command}: option {name!r} has no flag"
            assert flags[name].default is argparse.SUPPRESS  # unset flags leave the job's default
            assert flags[name].option_strings == [opt.cli_flag]
        else:
            assert name not in flags
    reading = set(READ_OPTIONS) if "data" in positional_of(job) else set()
    assert set(flags) <= set(declared) | set(positional_of(job)) | reading | set(STANDARD), \
        f"{command}: flags that no option of the job declares: {set(flags) - set(declared)}"


@pytest.mark.parametrize("kind", ["fit", "audit"])
def test_analysis_files_accept_every_option_their_job_declares(kind):
    from bayesirt.jobs.analysis import _JOBS, table_options
    from bayesirt.utils.options import options_of

    declared = {n for n, o in options_of(_JOBS[kind]).items() if o.toml is None and n != "spec"}
    assert set(table_options(kind)) == declared
    reasons = {n: o.toml for n, o in options_of(_JOBS[kind]).items() if o.toml is not None}
    assert all(isinstance(r, str) and r for r in reasons.values())


def test_safety_step_tables_are_the_step_jobs_options():
    from bayesirt.jobs.suite import SAFETY_STEPS, _step_jobs, step_options
    from bayesirt.utils.options import options_of

    for step in SAFETY_STEPS:
        assert step_options(step) == {n: o.default for n, o in options_of(_step_jobs()[step]).items() if o.toml is None}


def test_a_declared_option_becomes_a_plain_default():
    from bayesirt.utils.options import declare, option, options_of

    @declare()
    def job(data, out, *, draws=option(10, "draws"), force=False):
        return draws

    assert job("d", "o") == 10 and job.__kwdefaults__["draws"] == 10
    assert options_of(job)["draws"].help == "draws"
    with pytest.raises(TypeError, match="not declared options"):
        @declare()
        def bad(data, *, draws=10):
            return draws


def _declared_bodies():
    """(module, function, its declared option names, its body) of every ``@declare``d function and
    the ``__post_init__`` of every ``@declare``d class, read with ``ast``."""
    def is_declare(node):
        return any(isinstance(d, ast.Call) and getattr(d.func, "id", "") == "declare" for d in node.decorator_list)

    def is_option(node):
        return isinstance(node, ast.Call) and getattr(node.func, "id", "") == "option"

    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and is_declare(node):
                options = {a.arg for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if is_option(d)}
                yield name, node.name, options, node, False
            elif isinstance(node, ast.ClassDef) and is_declare(node):
                options = {n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and is_option(n.value)}
                for method in node.body:
                    if isinstance(method, ast.FunctionDef) and method.name == "__post_init__":
                        yield name, f"{node.name}.__post_init__", options, method, True


#: The checks of settings in function bodies that declarations replace (utils.validation's and the
#: modules' own integer checks).
SETTING_CHECKS = {"check_int", "check_number", "check_probability", "check_choice", "check_bool", "check_integer",
                  "_check_int", "_check_draws", "_check_workers", "_check_settings", "_check_count"}


def _hand_checks(options: set[str], body: ast.AST, on_self: bool) -> list[str]:
    """Hand-written checks of ``options`` in ``body``: a settings check given one of them, or an
    ``if`` that raises on a comparison of options with constants only (a comparison with the data
    is a check of the data)."""
    def named(node):
        if on_self and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return node.attr if node.attr in options else None
        return node.id if not on_self and isinstance(node, ast.Name) and node.id in options else None

    def constant(node):  # a literal or a module constant (an upper-case name)
        return isinstance(node, (ast.Constant, ast.Tuple, ast.List, ast.Set)) or (
            isinstance(node, ast.Name) and node.id.isupper())

    found = set()
    for node in ast.walk(body):
        if isinstance(node, ast.Call):
            func = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if func in SETTING_CHECKS:
                given = [named(a) for a in [*node.args, *(k.value for k in node.keywords)]]
                given += [k.value.value for k in node.keywords if k.arg == "name" and isinstance(k.value, ast.Constant)
                          and k.value.value in options]
                found |= {f"{func}({g})" for g in given if g}
        elif isinstance(node, ast.If) and any(isinstance(n, ast.Raise) for n in node.body):
            operands = [[c.left, *c.comparators] for c in ast.walk(node.test) if isinstance(c, ast.Compare)]
            if operands and all(all(named(n) or constant(n) for n in ops) for ops in operands):
                found |= {f"if {named(n)}: raise" for ops in operands for n in ops if named(n)}
    return sorted(found)


@pytest.mark.slow
def test_no_hand_written_check_of_a_declared_option():
    """A declared option is checked by its declaration (utils.options.declare), not again by hand in
    the body of the function (or the dataclass) that declares it."""
    found = {f"{module}.{func}": checks for module, func, options, body, on_self in _declared_bodies()
             if (checks := _hand_checks(options, body, on_self))}
    assert not found, f"hand-written checks of declared options: {found}"


def test_the_hand_check_finder_finds_one():
    body = ast.parse("def f(*, draws=option(1, 'd')):\n    check_int(draws, name='draws', caller='f')\n"
                     "    if draws > 5:\n        raise ConfigError('x')\n").body[0]
    assert _hand_checks({"draws"}, body, False) == ["check_int(draws)", "if draws: raise"]
    data = ast.parse("def f(data, *, k=option(1, 'k')):\n    if k > data.sizes['item']:\n        raise DataError('x')\n")
    assert _hand_checks({"k"}, data.body[0], False) == []


#: Modules that still raise the base class, each with the branch that converts it; remove a line when
#: that branch is merged (none left: the squarem branch converted bayesirt.frequentist).
BASE_CLASS_RAISES_ALLOWED: dict[str, str] = {}


def _base_class_raises(source: str) -> list[int]:
    """Lines that build the base class ``BayesIRTError(...)`` (raised at once or through a helper):
    a refused setting is a ConfigError, bad data a DataError, an unwritable output an OutputError."""
    def named(func):
        return getattr(func, "id", None) == "BayesIRTError" or getattr(func, "attr", None) == "BayesIRTError"

    return sorted(n.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and named(n.func))


def test_no_bare_base_class_raise():
    """``BayesIRTError`` is only the base class (errors.py): every error names what went wrong by its
    subclass, so the CLI and callers can tell a setting from the data from the output folder."""
    found = {m: lines for m, path in MODULES.items() if m not in ("bayesirt.errors", *BASE_CLASS_RAISES_ALLOWED)
             and (lines := _base_class_raises(path.read_text(encoding="utf-8")))}
    assert found == {}, f"raise ConfigError, DataError or OutputError instead of BayesIRTError: {found}"
    stale = [m for m in BASE_CLASS_RAISES_ALLOWED if m not in MODULES or not _base_class_raises(MODULES[m].read_text())]
    assert stale == [], f"no longer raise the base class: remove them from BASE_CLASS_RAISES_ALLOWED: {stale}"


def test_the_base_class_finder_finds_one():
    source = ("from bayesirt import errors\nfrom bayesirt.errors import BayesIRTError, DataError\n"
              "def f(x):\n    if x:\n        raise BayesIRTError('x')\n    raise DataError('y')\n"
              "def _fail(m):\n    raise errors.BayesIRTError(m)\n"
              "class StepsFailed(BayesIRTError):\n    pass\n")
    assert _base_class_raises(source) == [5, 8]


#: Option names whose default differs between commands, and why. Issue 41's rule: one name per
#: meaning; the same meaning may keep a different default only for a stated reason. A new difference
#: fails the test below until it is listed here (with its reason) or aligned.
DIFFERENT_DEFAULTS = {
    # the same meaning, a deliberate default
    "chains": "sbc refits every one of its hundreds of replicates: 2 chains each, 4 for one fit",
    "tune": "sbc refits every replicate: 500 tuning steps each, 1,000 for one fit",
    "draws": "sbc: 500 per replicate; prior-check: prior draws, cheap; score/select: posterior draws of the item "
             "parameters read from a bank (200 carry its uncertainty at a fraction of the cost)",
    "thin": "sbc's None picks per method (10 for nuts, ranks need near-independent draws; 1 for advi)",
    "quadrature": "mirt-mml's None picks per dimension (61, 31, 15, 9 nodes for D = 1..4): a D-dimensional grid",
    "design": "prior-check simulates only without --data (None: give one or the other); sbc always simulates",
    "dims": "compare takes --specs or --dims (None: specs); mirt-mml always fits a ladder of dimensions",
    "rotation": "compare writes raw loadings unless asked (None); factors and mirt-mml report rotated ones",
    "level": "score: 90% intervals (SAFE's); sandbag: 95% resolvable gap of a two-sided test",
    "splits": "cat: SAFE's 20 calibration/test splits; splithalf: 10 split-half reliabilities",
    "workers": "audit and sandbag take seconds at benchmark sizes, less than starting a cluster (1); cat, "
               "compare and sbc refit models (None: one worker per core); docs/guide/scaling.md",
    "method": "the inference method: fit, check, compare, ppc, sbc sample by NUTS (nuts); factors estimates "
              "abilities by SAFE's MAP-EM (map). select's item-selection rule is selection_rule (renamed)",
    "selection_rule": "the rule that picks the items: cat's adaptive test takes the most informative next item "
                      "(fisher, SAFE's); select's static test a stratified random sample (design-unbiased scores)",
    "null": "the null distribution a detector's cut-off comes from: fingerprint's of self-disagreement (SAFE's "
            "repeats); sandbag's of person fit and shift on honest re-collections (recollection)",
}


def _defaults_by_name(jobs: dict) -> dict[str, dict[str, object]]:
    """``{option: {command: default}}`` of the options whose default differs between ``jobs``."""
    from bayesirt.utils.options import options_of

    seen: dict[str, dict[str, object]] = {}
    for command, job in jobs.items():
        for name, opt in options_of(job).items():
            seen.setdefault(name, {})[command] = opt.default
    return {n: by for n, by in seen.items() if len({repr(d) for d in by.values()}) > 1}


def test_an_option_name_has_one_default_or_a_stated_reason():
    from bayesirt.cli.parser import COMMANDS, command_job

    found = _defaults_by_name({c: command_job(c) for c in COMMANDS})
    unexplained = {n: by for n, by in found.items() if n not in DIFFERENT_DEFAULTS}
    assert unexplained == {}, "options with different defaults across commands: align them or say why"
    assert sorted(set(DIFFERENT_DEFAULTS) - set(found)) == [], "aligned since: remove from DIFFERENT_DEFAULTS"


def test_the_default_finder_finds_a_difference():
    from bayesirt.utils.options import declare, option

    @declare()
    def one(*, draws=option(10, "draws", low=1), seed=option(0, "seed", low=0)):
        return draws, seed

    @declare()
    def two(*, draws=option(20, "draws", low=1), seed=option(0, "seed", low=0)):
        return draws, seed

    assert _defaults_by_name({"one": one, "two": two}) == {"draws": {"one": 10, "two": 20}}
