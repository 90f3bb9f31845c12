"""Every documented ``bayesirt`` command runs (slow; the check that each is run or is the first hour's is fast).

tests/test_docs_blocks.py checks that each command in the fenced sh/bash blocks of README.md, ARCHITECTURE.md and
docs/**/*.md parses; here each distinct one runs (``bayesirt.cli.main`` in this process) in a fresh folder that
holds stand-ins for the files it names (``my_matrix.csv``, ``responses.npz``, ``lm_eval_out/``, ...): simulated
by bayesirt's simulators and written by pandas/NumPy/bayesirt in the layouts docs/guide/data.md describes, harness
output in the harness's file layout (lm-eval and HELM as tests/test_harness.py writes them; Inspect AI logs written
by inspect_ai itself, tests/fixtures/harness), item banks and audits made by bayesirt (``STAND_INS``). Each must
exit 0 and write report.md and the files the documents name (``documented_files``).

What differs from the page, all listed here: commands that sample with NUTS at the default draws run with
``FEWER_DRAWS`` appended (sbc also with ``FEWER_REPLICATES``), and the three analysis files run from copies with
the smaller settings of ``SMALLER``; the rest run exactly as written. README.md's own commands (its first hour)
are run as written by tests/test_readme_first_hour.py.
"""

from __future__ import annotations

import atexit
import functools
import json
import shlex
import shutil
import tempfile
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bayesirt.cli.main import main
from bayesirt.data import save_responses, simulate_dif_benchmark
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.jobs.fit import run_fit_job
from test_docs_blocks import COMMANDS
from test_readme_first_hour import first_hour_blocks
from test_harness import lm_record, write_helm_run, write_lm_run

ROOT = Path(__file__).resolve().parents[1]


def distinct_commands() -> dict[tuple[str, ...], list[str]]:
    """Each distinct documented argv -> the places (document:line) that show it, in first-seen order."""
    seen: dict[tuple[str, ...], list[str]] = {}
    for where, argv in COMMANDS:
        seen.setdefault(tuple(argv), []).append(where)
    return seen


DISTINCT = distinct_commands()

# --- stand-ins for the files the commands name ---------------------------------------------------------

def _matrix(seed: int, n_items: int, n_models: int, kind: str = "2pl"):
    ds, _ = simulate_pl(kind, n_items=n_items, n_models=n_models, seed=seed)
    return ds


def _wide_csv(ds, path: Path, *, rows: str = "model") -> None:
    """A wide CSV: one row per model (header ``model``) or per item (header ``item``), cells 0/1, empty = missing."""
    table = pd.DataFrame(ds["responses"].values.T, index=[str(m) for m in ds["model_id"].values],
                         columns=[str(i) for i in ds["item_id"].values])
    table = table.where(table >= 0)
    if rows == "item":
        table = table.T
    table.index.name = rows
    path.parent.mkdir(parents=True, exist_ok=True)
    table.astype("Int8").to_csv(path)


def _dif(seed: int, *, n_owners: int = 30, n_items: int = 60, labels: tuple[str, ...] = ()):
    """A benchmark with planted family DIF (Qwen, Llama, Gemma), its family labels renamed to ``labels`` if given."""
    ds, _ = simulate_dif_benchmark(n_owners=n_owners, n_items=n_items, seed=seed)
    if labels:
        names = dict(zip(("Qwen", "Llama", "Gemma"), labels, strict=True))
        ds = ds.assign_coords(family=("model", [names[f] for f in ds["family"].values]))
    return ds


def my_matrix(work: Path) -> None:
    """A 2PL matrix, 60 models x 40 items (models as rows)."""
    _wide_csv(_matrix(1, 40, 60), work / "my_matrix.csv")


def leaderboard(work: Path) -> None:
    """A leaderboard of 90 models of three families by 30 owners (``owner0000/Qwen-ckpt-0``, ...), 60 items."""
    _wide_csv(_dif(2), work / "leaderboard.csv")


def responses_npz(work: Path) -> None:
    """The NT contract: 90 models labelled ``family_0``-``family_2`` x 60 items with planted DIF."""
    ds = _dif(4, labels=("family_0", "family_1", "family_2"))
    np.savez(work / "responses.npz", responses=ds["responses"].values.astype(np.float64),
             **{k: np.asarray(ds[k].values, dtype=str) for k in ("item_id", "model_id", "family", "owner",
                                                                 "item_group")})


def matrix_and_labels(work: Path) -> None:
    """``matrix.csv`` (models as rows) and ``models.csv`` (model_id, family, owner) of a 90 x 60 DIF benchmark."""
    ds = _dif(5, labels=("alpha", "beta", "gamma"))
    _wide_csv(ds, work / "matrix.csv")
    pd.DataFrame({k: ds[k].values for k in ("model_id", "family", "owner")}).to_csv(work / "models.csv", index=False)


def two_audits(work: Path) -> None:
    """``outputs/audit_mmlu`` and ``outputs/audit_bbh``: quick audits of two benchmarks of the same 90 models."""
    for seed, name in ((6, "mmlu"), (7, "bbh")):
        save_responses(_dif(seed), work / f"{name}.nc")
        assert main(["audit", f"{name}.nc", "--quick", "--out", f"outputs/audit_{name}", "--no-progress"]) == 0


def pooled_nc(work: Path) -> None:
    """A saved response Dataset: 2PL, 80 models x 30 items."""
    save_responses(_matrix(8, 30, 80), work / "pooled.nc")


def ability_csv(work: Path) -> None:
    """A long CSV (model, item, correct, item_group) of 60 models x 24 items in four item groups."""
    ds = _matrix(9, 24, 60)
    y = ds["responses"].values
    rows = [(str(m), str(i), int(y[a, b]), f"type{a % 4}") for a, i in enumerate(ds["item_id"].values)
            for b, m in enumerate(ds["model_id"].values)]
    pd.DataFrame(rows, columns=["model", "item", "correct", "item_group"]).to_csv(work / "ability.csv", index=False)


def three_benchmarks(work: Path) -> None:
    """``bench1.csv`` .. ``bench3.csv``: the same 60 models on three benchmarks of 30 items each."""
    ds = _matrix(10, 90, 60)
    for k in range(3):
        _wide_csv(ds.isel(item=slice(30 * k, 30 * (k + 1))), work / f"bench{k + 1}.csv")


def suspects_and_cohort(work: Path) -> None:
    """``cohort.csv``: 60 genuine models; ``suspects.csv``: 5 other models on the same 40 items."""
    ds = _matrix(11, 40, 65)
    _wide_csv(ds.isel(model=slice(0, 60)), work / "cohort.csv")
    _wide_csv(ds.isel(model=slice(60, 65)), work / "suspects.csv")


def reference_and_query(work: Path) -> None:
    """``reference.csv``: 10 models of a 2PL on 50 items, each collected twice (``m0-run1``, ``m0-run2``: 5% of
    the second run's answers differ), ``identities.csv`` mapping each collection to its model; ``query.csv``:
    4 endpoints, 3 of them fresh collections of reference models and one a model not in the reference."""
    ds = _matrix(12, 50, 11)
    rng = np.random.default_rng(12)

    def collection(k: int, name: str):
        one = ds.isel(model=[k]).copy(deep=True)
        y = one["responses"].values
        flip = rng.random(y.shape) < 0.05
        y[flip] = 1 - y[flip]
        return one.assign_coords(model=[name], model_id=("model", [name]))

    runs = [collection(k, f"m{k}-run{r}") for k in range(10) for r in (1, 2)]
    _wide_csv(xr.concat(runs, dim="model"), work / "reference.csv")
    pd.DataFrame({"model_id": [f"m{k}-run{r}" for k in range(10) for r in (1, 2)],
                  "identity": [f"m{k}" for k in range(10) for _ in (1, 2)]}).to_csv(work / "identities.csv",
                                                                                      index=False)
    query = [collection(k, name) for k, name in ((0, "endpoint-a"), (4, "endpoint-b"), (7, "endpoint-c"),
                                                 (10, "endpoint-d"))]
    _wide_csv(xr.concat(query, dim="model"), work / "query.csv")


def human_test(work: Path) -> None:
    """A 2PL test of 20 items taken by 300 people, one row per item."""
    _wide_csv(_matrix(13, 20, 300), work / "human_test.csv", rows="item")


def answers_and_key(work: Path) -> None:
    """``answers.npy``: options 0-4 of 60 people (rows) on 20 items; ``key.csv``: each item's correct option."""
    ds = _matrix(14, 20, 60)
    rng = np.random.default_rng(14)
    key = rng.integers(0, 5, size=20)
    correct = ds["responses"].values.T == 1
    wrong = (key + rng.integers(1, 5, size=correct.shape)) % 5
    np.save(work / "answers.npy", np.where(correct, key, wrong))
    pd.DataFrame({"item_id": np.arange(20), "key": key}).to_csv(work / "key.csv", index=False)


def lm_eval_out(work: Path) -> None:
    """``lm_eval --log_samples`` output of 12 models on arc_easy (acc, acc_norm; filter strict-match) and
    hellaswag, 10 documents each."""
    rng = np.random.default_rng(15)
    for m in range(12):
        ability = rng.normal()
        tasks = {}
        for task in ("arc_easy", "hellaswag"):
            p = 1 / (1 + np.exp(-(ability + rng.normal(size=10))))
            tasks[task] = [lm_record(task, d, filt="strict-match", acc=float(rng.random() < p[d]),
                                     acc_norm=float(rng.random() < p[d])) for d in range(10)]
        write_lm_run(work / "lm_eval_out", f"org{m}__model-{m}", tasks)


def helm_runs(work: Path) -> None:
    """``benchmark_output/runs/v1/``: HELM runs of 12 models on two MMLU subjects, 10 instances each."""
    rng = np.random.default_rng(16)
    for m in range(12):
        ability = rng.normal()
        for subject in ("anatomy", "virology"):
            p = 1 / (1 + np.exp(-(ability + rng.normal(size=10))))
            write_helm_run(work / "benchmark_output" / "runs" / "v1", f"org{m}/model-{m}", subject,
                           [(f"id{d}", 0, float(rng.random() < p[d])) for d in range(10)])


@functools.cache
def _chem_map_bank() -> Path:
    """The documents' first command of scoring, ``fit chembench --method map``, run once per process."""
    folder = Path(tempfile.mkdtemp(prefix="chem_map_"))
    atexit.register(shutil.rmtree, folder, True)
    assert main(["fit", "chembench", "--method", "map", "--out", str(folder / "chem_map"), "--no-progress"]) == 0
    return folder / "chem_map"


def chem_map(work: Path) -> None:
    """``outputs/chem_map/map.nc``: the item bank the documents make first (`fit chembench --method map`), by that
    command (a copy of one run, for select and score)."""
    shutil.copytree(_chem_map_bank(), work / "outputs" / "chem_map")


def partial_run(work: Path) -> None:
    """``partial_run/``: a data folder (responses.npy, items.csv, models.csv) of two new models that answered 25
    ChemBench items, each correct with probability .6."""
    folder = work / "partial_run"
    folder.mkdir()
    rng = np.random.default_rng(17)
    np.save(folder / "responses.npy", (rng.random((25, 2)) < 0.6).astype(np.int8))
    pd.DataFrame({"item_id": [f"chembench_{k}" for k in range(0, 250, 10)]}).to_csv(folder / "items.csv", index=False)
    pd.DataFrame({"model_id": ["org/new-a", "org/new-b"]}).to_csv(folder / "models.csv", index=False)


def chem_posterior(work: Path) -> None:
    """``outputs/chem/posterior.nc``: a 2PL posterior (ADVI) of a simulated 60 x 40 matrix, in place of the
    documents' NUTS fit of ChemBench (run by its own command above)."""
    run_fit_job(_matrix(18, 40, 60), work / "outputs" / "chem", method="advi", seed=1, progress=False)


def inspect_logs(work: Path) -> None:
    """``logs/``: Inspect AI logs written by inspect_ai 0.3.285 itself (tests/fixtures/harness/inspect/epochs: two
    models, task arith, several epochs per sample), the logs tests/test_harness_real.py reads."""
    shutil.copytree(ROOT / "tests" / "fixtures" / "harness" / "inspect" / "epochs", work / "logs")


def models_folder(work: Path) -> None:
    """The spec files of the repository's models/ folder (the commands run from the repository)."""
    shutil.copytree(ROOT / "models", work / "models")


#: Analysis files run with smaller settings than the repository's (what each file declares is a long job):
#: section -> key -> value replaced in a copy of the file.
SMALLER = {
    "analyses/demo.toml": {"fit": {"draws": 100, "tune": 100}},
    "analyses/near_tie_audit.toml": {"simulate": {"n_owners": 40, "n_items": 120},
                                     "audit": {"min_family_size": 10, "controls": 99, "composition_bootstrap": 99,
                                               "owner_bootstrap": 99}},
    "analyses/safety_suite.toml": {"safety.cat": {"splits": 2, "random_subsets": 10},
                                   "safety.factors": {"loading_bootstrap": 20}},
}


def analysis(name: str):
    def copy(work: Path) -> None:
        text = (ROOT / name).read_text()
        spec = tomllib.loads(text)
        for section, values in SMALLER[name].items():
            table = spec
            for part in section.split("."):
                table = table[part]
            assert set(values) <= set(table), f"{name} [{section}] no longer has {set(values) - set(table)}"
            table.update(values)
        (work / "analyses").mkdir(exist_ok=True)
        (work / name).write_text(_toml(spec))
    copy.__doc__ = f"a copy of {name} with {SMALLER[name]}"
    return copy


def _toml(spec: dict, prefix: str = "") -> str:
    """TOML text of a nested dict of scalars and lists (what analysis files hold)."""
    scalars = {k: v for k, v in spec.items() if not isinstance(v, dict)}
    out = [f"[{prefix}]"] if prefix and scalars else []
    out += [f"{k} = {json.dumps(v)}" for k, v in scalars.items()]
    for k, v in spec.items():
        if isinstance(v, dict):
            out.append(_toml(v, f"{prefix}.{k}" if prefix else k))
    return "\n".join(out) + "\n"


#: A path a command names -> what writes its stand-in there.
STAND_INS = {
    "my_matrix.csv": my_matrix, "leaderboard.csv": leaderboard, "responses.npz": responses_npz,
    "matrix.csv": matrix_and_labels, "outputs/audit_mmlu": two_audits, "pooled.nc": pooled_nc,
    "ability.csv": ability_csv, "bench1.csv": three_benchmarks, "suspects.csv": suspects_and_cohort,
    "reference.csv": reference_and_query, "human_test.csv": human_test, "answers.npy": answers_and_key,
    "lm_eval_out/": lm_eval_out, "logs/": inspect_logs, "benchmark_output/runs/v1/": helm_runs,
    "partial_run/": partial_run,
    "outputs/chem_map/map.nc": chem_map, "outputs/chem/posterior.nc": chem_posterior,
    "models/3pl.toml": models_folder,
    **{name: analysis(name) for name in SMALLER},
}

#: Appended to a command that samples with NUTS at the default draws (fit, check, ppc and compare without another
#: --method; sbc): the same job in fewer draws (argparse keeps an option's last value, so --replicates 10 replaces
#: sbc's documented 200). Only the draws shrink: the data, model, method and every output are the documented ones.
FEWER_DRAWS = ("--draws", "100", "--tune", "100", "--chains", "2")
FEWER_REPLICATES = ("--replicates", "10")
SAMPLERS = ("fit", "check", "ppc", "compare", "sbc")


#: compare refits each spec by K-fold when Pareto k flags too many models (on these 60 models it does): two folds
#: for specs; for MIRT dimensions (four multidimensional NUTS fits, each refitted per fold in a process pool, the
#: longest job of the documents) PSIS-LOO only.
FEWER_FOLDS = ("--folds", "2")
NO_KFOLD = ("--kfold", "never")


def shortened(argv: tuple[str, ...]) -> tuple[str, ...]:
    """What is appended to ``argv`` here (empty: it runs as written)."""
    method = argv[argv.index("--method") + 1] if "--method" in argv else "nuts"
    if argv[0] not in SAMPLERS or method != "nuts":
        return ()
    extra = {"sbc": FEWER_REPLICATES, "compare": NO_KFOLD if "--dims" in argv else FEWER_FOLDS}
    return FEWER_DRAWS + extra.get(argv[0], ())


#: Commands shown only in README.md's first hour, which tests/test_readme_first_hour.py runs as written.
FIRST_HOUR = [argv for argv, places in DISTINCT.items() if all(p.startswith("README.md:") for p in places)]

RUN = [argv for argv in DISTINCT if argv not in FIRST_HOUR]


#: Files the documents say a command writes in its --out folder (beyond report.md, which every job writes):
#: docs/guide/outputs.md (fit), scoring.md (map.nc, mml.nc, select, score), comparing.md (compare), README.md
#: (audit.nc).
FIT = {"posterior.nc", "items.csv", "models.csv", "summary.json", "abilities.png", "item_curves.png"}


def documented_files(argv: tuple[str, ...]) -> set[str]:
    method = argv[argv.index("--method") + 1] if "--method" in argv else "nuts"
    if argv[0] == "fit" and "mirt-confirmatory" in argv:  # getting-started: "# factor correlations"
        return {"posterior.nc", "factor_correlations.csv", "summary.json"}
    if argv[0] == "fit":
        return FIT - {"posterior.nc"} | {"map.nc"} if method == "map" else FIT
    # select writes the lm-eval --samples JSON only with --task (a bank of plain integer item ids)
    return {"mml": {"mml.nc"}, "select": {"test_items.csv"},
            "score": {"scores.csv", "scores.nc"}, "compare": {"compare.csv", "summary.json"},
            "audit": {"audit.nc"}, "ppc": {"posterior.nc"}}.get(argv[0], set())


def _out(argv: tuple[str, ...], work: Path) -> Path | None:
    if "--out" in argv:
        return work / argv[argv.index("--out") + 1]
    if argv[0] == "run":
        return work / tomllib.loads((work / argv[1]).read_text())["analysis"]["out"]
    return None


def test_every_documented_command_is_run():
    """Each distinct command is run below, or is a README command that the first hour's test runs."""
    assert len(DISTINCT) >= 40 and len(RUN) + len(FIRST_HOUR) == len(DISTINCT)
    first_hour = "\n".join(code for lang, code in first_hour_blocks((ROOT / "README.md").read_text()) if lang == "bash")
    assert FIRST_HOUR and all(shlex.join(["bayesirt", *argv]) in first_hour for argv in FIRST_HOUR)
    names = {token for argv in DISTINCT for token in argv}
    assert set(STAND_INS) <= names, f"stand-ins for files no command names: {set(STAND_INS) - names}"


@pytest.mark.slow
@pytest.mark.parametrize("argv", RUN, ids=[" ".join(a[:2]) + f" ({DISTINCT[a][0]})" for a in RUN])
def test_documented_command_runs(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for path, make in STAND_INS.items():
        if path in argv:
            make(tmp_path)
    code = main([*argv, *shortened(argv), "--no-progress"] if argv[0] != "datasets" else list(argv))
    said = capsys.readouterr()
    assert code == 0, f"{DISTINCT[argv]}: `bayesirt {' '.join(argv)}` exited {code}:\n{said.err[-3000:]}"
    out = _out(argv, tmp_path)
    if out is not None:
        assert out.is_dir(), f"{out} not written"
        written = {p.name for p in out.iterdir()}
        assert {"report.md", *documented_files(argv)} <= written, f"{DISTINCT[argv]}: wrote only {sorted(written)}"
    else:
        assert "chembench" in said.out  # `datasets` lists the embedded data
