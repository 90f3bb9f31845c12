"""The documentation's Python runs and its cross-references name real objects.

- Every ```python block of README.md, ARCHITECTURE.md and the documentation pages (docs/**/*.md) compiles
  and every name it takes from bayesirt (``from bayesirt.x import a``, ``import bayesirt as bi`` then ``bi.a``) exists: fast, no
  fitting.
- Marked ``slow``: every block runs as written in a fresh folder that holds the files it reads, made
  by bayesirt itself (a fit, a posterior predictive check, a harness run); names the reader supplies
  (``my_model_answers``) are given.
- Every ``:func:`` / ``:class:`` / ``:mod:`` / ``:data:`` / ``:meth:`` / ``:attr:`` / ``:exc:`` target in the
  package's source written as a ``bayesirt.`` path (also ``~bayesirt.`` and, in a package, ``.name``)
  imports, and so does every ```bayesirt.x.y``` the two documents name.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from bayesirt.cli.parser import build_parser
from bayesirt.errors import ConfigError
from bayesirt.data import make_responses, simulate_dif_benchmark
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.jobs.fit import run_fit_job
from bayesirt.jobs.workflow import run_ppc_job
from lm_eval_runs import write_lm_eval_run

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ("README.md", "ARCHITECTURE.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")
                                                      if not p.relative_to(ROOT / "docs").parts[0].startswith("_")))
ROLE = re.compile(r":(?:func|class|mod|data|meth|attr|exc|obj):`~?(\.?[A-Za-z_][\w.]*)`")


def python_blocks() -> list[tuple[str, str]]:
    """``(document:line, code)`` of every fenced python block of the documents, in order."""
    blocks = []
    for name in DOCUMENTS:
        text = (ROOT / name).read_text(encoding="utf-8")
        for m in re.finditer(r"^```python\n(.*?)^```$", text, flags=re.S | re.M):
            blocks.append((f"{name}:{text.count(chr(10), 0, m.start()) + 1}", m.group(1)))
    return blocks


BLOCKS = python_blocks()


def resolves(target: str) -> bool:
    """Whether the dotted ``target`` is an importable module or an attribute path below one (a
    dataclass field or annotated class attribute counts)."""
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        rest = parts[i:]
        for k, name in enumerate(rest):
            if hasattr(obj, name):
                obj = getattr(obj, name)
            elif isinstance(obj, type) and k == len(rest) - 1:
                return name in getattr(obj, "__dataclass_fields__", {}) or name in getattr(obj, "__annotations__", {})
            else:
                return False
        return True
    return False


def bayesirt_names(code: str) -> list[str]:
    """The dotted bayesirt names a block uses: its imports and attributes of imported bayesirt modules."""
    tree = ast.parse(code)
    aliases, names = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "bayesirt":
                    names.append(a.name)
                    aliases[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "bayesirt":
            names += [f"{node.module}.{a.name}" for a in node.names]
    names += [f"{aliases[n.value.id]}.{n.attr}" for n in ast.walk(tree)
              if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in aliases]
    return names


def test_the_documents_have_python_blocks_and_the_checks_can_fail():
    assert sum(b.startswith("README.md") for b, _ in BLOCKS) >= 1 and sum(b.startswith("docs/") for b, _ in BLOCKS) >= 3
    assert bayesirt_names("import bayesirt as bi\nfrom bayesirt.safety import run_score_job\nbi.fit(x)") == [
        "bayesirt", "bayesirt.safety.run_score_job", "bayesirt.fit"]
    assert not resolves("bayesirt.safety.run_score_job")  # the README's old import: the job is in bayesirt.jobs
    assert not resolves("bayesirt.audit.bayes_mirt")  # moved to bayesirt.audit.adjustment
    assert resolves("bayesirt.jobs.run_score_job") and resolves("bayesirt.audit.engine.dif.DIFFit.newton_capped")


@pytest.mark.parametrize("where,code", BLOCKS, ids=[b for b, _ in BLOCKS])
def test_block_compiles_and_its_bayesirt_names_exist(where, code):
    compile(code, where, "exec")
    missing = [n for n in bayesirt_names(code) if not resolves(n)]
    assert not missing, f"{where} uses names bayesirt does not have: {missing}"


def _package_references() -> list[tuple[str, str]]:
    """``(file, target)`` of every role target in the package's source, relative ones made absolute."""
    out = []
    for path in sorted((ROOT / "bayesirt").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        package = module.removesuffix(".__init__") if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for target in ROLE.findall(path.read_text(encoding="utf-8")):
            if target.startswith("."):
                out.append((str(path.relative_to(ROOT)), package + target))
            elif target.startswith("bayesirt."):
                out.append((str(path.relative_to(ROOT)), target))
    return out


def test_docstring_cross_references_resolve():
    references = _package_references()
    assert len(references) > 300  # the scan finds the package's references
    broken = [f"{f}: {t}" for f, t in references if not resolves(t)]
    assert broken == []


def test_documents_name_only_importable_bayesirt_paths():
    broken = [f"{name}: {ref}" for name in DOCUMENTS
              for ref in sorted(set(re.findall(r"`(bayesirt(?:\.\w+)+)", (ROOT / name).read_text(encoding="utf-8"))))
              if not resolves(ref)]
    assert broken == []


# --- the blocks run (slow: each fits a model) ---------------------------------------------------------

FIRST_HOUR = "tests/test_readme_first_hour.py runs it as written, after the bash block that writes first/lsat7"


def _missing_cells(seed: int, n_items: int, n_models: int, missing: float):
    """A simulated 2PL matrix with plain integer item ids and a share of cells missing at random."""
    ds, _ = simulate_pl("2pl", n_items=n_items, n_models=n_models, seed=seed, missing=missing)
    return make_responses(ds["responses"].values, item_id=[str(100 + i) for i in range(n_items)],
                          model_id=[f"m{k:03d}" for k in range(n_models)])


def _ppc_folder(workdir: Path) -> None:
    """``outputs/chem/posterior.nc``: a posterior predictive check folder (fit with log-likelihood and
    replicated responses) of a 40 x 60 matrix with 10% of cells missing, by ADVI."""
    run_ppc_job(_missing_cells(3, 40, 60, 0.1), workdir / "outputs" / "chem", method="advi", seed=1, ppc_draws=50,
                progress=False)


def _nt_npz(workdir: Path) -> None:
    """``responses.npz`` in the NT contract: 90 models of 3 families x 60 items with planted DIF."""
    ds, _ = simulate_dif_benchmark(n_owners=30, n_items=60, seed=4)
    np.savez(workdir / "responses.npz", responses=ds["responses"].values.astype(np.float64),
             model_id=np.asarray(ds["model_id"].values, dtype=str), family=np.asarray(ds["family"].values, dtype=str),
             owner=np.asarray(ds["owner"].values, dtype=str), item_group=np.asarray(ds["item_group"].values, dtype=str))


def _bank_and_run(workdir: Path) -> dict:
    """``outputs/fit/posterior.nc`` (an ADVI 2PL bank on 60 items with plain integer ids) and ``run/``,
    the lm-eval log of two new models on 25 of its items under task arc_challenge; and the reader's
    own ``my_model_answers(item)``, here a seeded coin that answers 60% of items correctly."""
    data = _missing_cells(5, 60, 200, 0.0)
    run_fit_job(data.isel(model=slice(0, 198)), workdir / "outputs" / "fit", method="advi", seed=1, progress=False)
    docs = [int(i) for i in data["item"].values[:25]]
    for k in (198, 199):
        answers = data["responses"].isel(model=k).values[:25]
        write_lm_eval_run(workdir / "run", f"org/new-{k}", "arc_challenge", docs, answers)
    rng = np.random.default_rng(0)
    return {"my_model_answers": lambda item: int(rng.random() < 0.6)}


#: What each block reads, by a path it names -> the function that writes it there (returning names the
#: reader supplies), or a reason it is run elsewhere.
INPUTS = {"first/lsat7/posterior.nc": FIRST_HOUR, "outputs/chem/posterior.nc": _ppc_folder,
          "responses.npz": _nt_npz, "outputs/fit/posterior.nc": _bank_and_run}


@pytest.mark.slow
@pytest.mark.parametrize("where,code", BLOCKS, ids=[b for b, _ in BLOCKS])
def test_block_runs_as_written(where, code, tmp_path, monkeypatch):
    needs = [INPUTS[p] for p in INPUTS if f'"{p}"' in code]
    for reason in (n for n in needs if isinstance(n, str)):
        pytest.skip(reason)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__main__"}
    for make in needs:
        namespace.update(make(tmp_path) or {})
    exec(compile(code, where, "exec"), namespace)  # noqa: S102 - the documented code, run as a reader would


def command_lines() -> list[tuple[str, list[str]]]:
    """``(document:line, argv)`` of every ``bayesirt`` command in the fenced sh/bash blocks of the documents
    (comments dropped), which the real parser must accept."""
    lines = []
    for name in DOCUMENTS:
        text = (ROOT / name).read_text(encoding="utf-8")
        for m in re.finditer(r"^```(?:sh|bash)\n(.*?)^```$", text, flags=re.S | re.M):
            first = text.count("\n", 0, m.start()) + 2
            for k, line in enumerate(m.group(1).splitlines()):
                argv = shlex.split(line, comments=True)
                if argv and argv[0].endswith("bayesirt"):
                    lines.append((f"{name}:{first + k}", argv[1:]))
    return lines


COMMANDS = command_lines()


def test_the_documents_have_commands():
    assert len(COMMANDS) >= 40 and sum(w.startswith("docs/guide/") for w, _ in COMMANDS) >= 10


@functools.cache
def shared_parser():
    return build_parser()


def refusal(argv: list[str], capsys) -> str | None:
    """What the parser says when it refuses ``argv`` (None when it accepts it)."""
    try:
        shared_parser().parse_args(argv)
    except ConfigError as error:
        return str(error)
    except SystemExit:
        return capsys.readouterr().err
    return None


@pytest.mark.parametrize("where,argv", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_documented_command_parses(where, argv, capsys):
    """Every documented command names a real command, real flags and values inside their declared
    ranges and choices (what a user copying it would otherwise meet as exit 2)."""
    said = refusal(argv, capsys)
    assert said is None, f"{where}: `bayesirt {shlex.join(argv)}` is refused by the parser: {said}"


def same_out_folders(commands: list[tuple[str, list[str]]]) -> list[str]:
    """Different commands of one document that write one --out folder: a reader running the page in order meets
    the second refused (exit 3, the folder exists)."""
    first: dict[tuple[str, str], tuple[str, list[str]]] = {}
    clashes = []
    for where, argv in commands:
        if "--out" in argv:
            key = (where.split(":")[0], argv[argv.index("--out") + 1])
            if key in first and first[key][1] != argv:
                clashes.append(f"{where} writes {key[1]} as {first[key][0]} does")
            first.setdefault(key, (where, argv))
    return clashes


def test_no_two_commands_of_a_document_write_one_folder():
    assert same_out_folders(COMMANDS) == []
    assert same_out_folders([("a.md:1", ["audit", "x.npz", "--out", "o"]), ("a.md:2", ["audit", "y.csv", "--out", "o"]),
                             ("a.md:3", ["audit", "x.npz", "--out", "o"]), ("b.md:1", ["fit", "z", "--out", "o"])]) == [
        "a.md:2 writes o as a.md:1 does"]


def test_a_refused_command_fails_the_check(capsys):
    assert "did you mean 'nuts'" in refusal(["fit", "lsat6", "--method", "nutz"], capsys)
    assert "--budjet" in refusal(["select", "bank.nc", "--budjet", "5", "--out", "x"], capsys)
    assert refusal(["fit", "lsat6", "--method", "nuts", "--out", "x"], capsys) is None
