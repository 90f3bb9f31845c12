"""The safety-toolkit and factor-structure subcommands run end to end from the command line."""

import numpy as np
import pandas as pd
import pytest

from bayesirt.cli.main import main
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.data.io import save_responses


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    responses, _ = simulate_pl("2pl", n_items=30, n_models=120, seed=21)
    return str(save_responses(responses, tmp_path_factory.mktemp("data") / "sim.nc"))


def _files(out):
    return {p.name for p in out.iterdir()}


def test_personfit(tmp_path, data_file):
    out = tmp_path / "pf"
    assert main(["personfit", data_file, "--fpr", "0.1", "--out", str(out), "--no-progress"]) == 0
    assert "report.md" in _files(out)


def test_fingerprint(tmp_path, data_file, capsys):
    out = tmp_path / "fp"  # no repeated collections: the null is refused (issue 33), not an upper bound
    assert main(["fingerprint", data_file, data_file, "--resamples", "5", "--out", str(out)]) == 2
    assert "needs repeated collections" in capsys.readouterr().err and not out.exists()


def test_information_from_responses(tmp_path, data_file):
    out = tmp_path / "info"
    assert main(["information", data_file, "--out", str(out)]) == 0
    assert {"information.csv", "report.md"} <= _files(out)


def test_cat_study(tmp_path, data_file):
    out = tmp_path / "cat"
    argv = ["cat", data_file, "--budgets", "5,10", "--splits", "2", "--random-subsets", "3", "--workers", "1",
            "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    assert "report.md" in _files(out)


@pytest.mark.slow
def test_sandbag(tmp_path, data_file):
    out = tmp_path / "sb"
    assert main(["sandbag", data_file, "--test-length", "10", "--out", str(out), "--no-progress"]) == 0
    assert "report.md" in _files(out)


@pytest.mark.slow
def test_factors_from_an_ability_table(tmp_path):
    rng = np.random.default_rng(0)
    f = rng.normal(size=(200, 2))
    loadings = np.array([[0.8, 0], [0.7, 0], [0.75, 0.1], [0, 0.8], [0.1, 0.7], [0, 0.75]])
    x = f @ loadings.T + rng.normal(0, 0.5, (200, 6))
    csv = tmp_path / "abilities.csv"
    pd.DataFrame(x, columns=[f"b{j}" for j in range(6)], index=pd.Index([f"m{i}" for i in range(200)], name="model")
                 ).to_csv(csv)
    out = tmp_path / "fa"
    assert main(["factors", str(csv), "--n-factors", "1,2", "--parallel-iter", "50", "--out", str(out)]) == 0
    fit = pd.read_csv(out / "fit_indices.csv")
    assert fit.set_index("n_factors").loc[2, "cfi"] > fit.set_index("n_factors").loc[1, "cfi"]


def test_bad_input_is_one_line(tmp_path, capsys, data_file):
    assert main(["personfit", data_file, "--fpr", "2", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesirt: error:") and err.count("\n") == 1


@pytest.mark.slow
def test_declared_safety_suite_pools_benchmarks(tmp_path):
    files = []
    for k in range(3):
        responses, _ = simulate_pl("2pl", n_items=15, n_models=60, seed=30 + k)
        files.append(str(save_responses(responses, tmp_path / f"bench{k}.nc")))
    spec = tmp_path / "suite.toml"
    spec.write_text(f'[analysis]\nkind = "safety"\ndata = {files!r}\nout = "{tmp_path / "suite"}"\n'
                    '[safety]\nsteps = ["information", "personfit"]\n[safety.personfit]\nfpr = 0.2\n'.replace("'", '"'))
    assert main(["run", str(spec), "--no-progress"]) == 0
    assert {"information", "personfit", "report.md"} <= _files(tmp_path / "suite")
    # one item bank per benchmark, and the composite of the three, pooled over their 60 shared models
    assert {"bench0", "bench1", "bench2", "composite", "scopes.csv"} <= _files(tmp_path / "suite" / "personfit")
    assert len(pd.read_csv(tmp_path / "suite" / "personfit" / "bench1" / "items.csv")) == 15
    assert len(pd.read_csv(tmp_path / "suite" / "personfit" / "composite" / "items.csv")) == 45


def test_safety_suite_skips_factors_with_too_few_files(tmp_path, data_file):
    """The shipped suite lists every step; on one benchmark the factor structure is skipped, saying why."""
    import json

    from bayesirt.jobs.suite import run_safety_suite

    out = run_safety_suite([data_file], tmp_path / "x", steps=["information", "factors"])
    entry = json.loads((out / "summary.json").read_text())["steps"]["factors"]
    assert entry["status"] == "skipped" and "three or more benchmark files" in entry["reason"]
    assert "factors: skipped (the factor structure needs three" in (out / "report.md").read_text()
    assert not (out / "factors").exists()
