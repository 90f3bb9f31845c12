"""`compare` at size (issue 42 item 3): without --method the fit method follows the number of observed
responses (--nuts-max-cells) and the choice is stated; K-fold refits write a line each with the time left;
both model weights (stacking, pseudo-BMA+) are reported and --weights picks the weight column."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bayesirt.cli.main import main
from bayesirt.comparison.settings import NUTS_MAX_CELLS
from bayesirt.data.datasets.simulate import simulate_pl
from bayesirt.errors import ConfigError
from bayesirt.jobs.comparison import choose_method, run_compare_job
from bayesirt.models.specs import load_spec


@pytest.fixture(scope="module")
def data():
    return simulate_pl("2pl", n_items=20, n_models=60, seed=8, missing=0.1)[0]


def _specs(*names):
    return {name: load_spec(name) for name in names}


def _benchmark_csv(tmp_path, kind, n_items, n_models, seed):
    """A simulated leaderboard (models x items, model ids ``org/m-i``) written as a wide CSV."""
    ds, _ = simulate_pl(kind, n_items=n_items, n_models=n_models, seed=seed)
    path = tmp_path / "bench.csv"
    pd.DataFrame(ds["responses"].values.T, index=[f"org{i % 7}/m-{i}" for i in range(n_models)],
                 columns=[f"q{j}" for j in range(n_items)]).rename_axis("model").to_csv(path)
    return path


def test_small_data_are_sampled_by_nuts_and_the_budget_counts_observed_responses(data):
    observed = int((data["responses"].values != -1).sum())
    assert observed < 1200  # 10% missing: the rule counts what was observed, not models x items
    method, why = choose_method(data, _specs("rasch", "2pl"), None, observed)
    assert method == "nuts" and f"{observed:,} observed responses, within --nuts-max-cells {observed:,}" in why
    method, why = choose_method(data, _specs("rasch", "2pl"), None, observed - 1)
    assert method == "advi" and "exceed --nuts-max-cells" in why and "not rasch" in why
    assert NUTS_MAX_CELLS > observed  # the default samples a small comparison


def test_laplace_when_every_spec_allows_it_advi_otherwise_and_a_request_wins(data):
    two_2pl = {"a": load_spec("2pl"), "b": load_spec("2pl")}
    assert choose_method(data, two_2pl, None, 10)[0] == "laplace"
    method, why = choose_method(data, {**two_2pl, "h": load_spec("2pl-hierarchical")}, None, 10)
    assert method == "advi" and "not h" in why
    assert choose_method(data, _specs("rasch", "3pl"), "nuts", 10) == ("nuts", "nuts, as requested (--method)")


def test_the_budget_is_a_declared_option():
    with pytest.raises(ConfigError, match="nuts_max_cells"):
        run_compare_job("unused.csv", "unused", specs=("rasch", "2pl"), nuts_max_cells=-1)


@pytest.mark.slow
def test_cli_states_the_chosen_method_and_writes_a_line_per_refit(tmp_path, capsys):
    path = _benchmark_csv(tmp_path, "2pl", 15, 60, seed=9)
    assert main(["compare", str(path), "--specs", "rasch,2pl", "--nuts-max-cells", "500", "--kfold", "always",
                 "--folds", "2", "--draws", "100", "--workers", "1", "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    why = "advi: 900 observed responses exceed --nuts-max-cells 500"
    assert f"compare: fit method: {why}" in err and "not rasch" in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["fit_method"]["method"] == "advi" and summary["fit_method"]["reason"].startswith(why)
    assert summary["settings"]["method"] == "advi" and summary["settings"]["nuts_max_cells"] == 500
    assert f"- Fit method: {why}" in (tmp_path / "out" / "report.md").read_text()
    # before the refits an estimate from the full fits, then one line per finished refit, in order
    assert "4 refits (2 specs x 2 folds), in this process; expected about" in err
    refits = [line for line in err.splitlines() if line.startswith("bayesirt: refit ")]
    # one worker: each spec's folds in turn, the spec whose full fit took longer first (so either order here)
    done = [line.split(" done (")[1].split(",")[0:2] for line in refits]
    first, second = done[0][0], done[2][0]
    assert {first, second} == {"rasch", "2pl"} and done == [
        [first, " fold 1 of 2"], [first, " fold 2 of 2"], [second, " fold 1 of 2"], [second, " fold 2 of 2"]]
    assert all("left" in line for line in refits[:-1]) and refits[-1].endswith("all done")
    table = pd.read_csv(tmp_path / "out" / "compare.csv")
    assert set(table["method"]) == {"loo_kfold"} and np.isclose(table["weight"].sum(), 1)


@pytest.mark.slow
def test_cli_picks_laplace_when_every_spec_is_a_fixed_prior_2pl(tmp_path, capsys):
    path = _benchmark_csv(tmp_path, "2pl", 30, 80, seed=10)
    wide = tmp_path / "2pl-wide.toml"  # a copy of the 2PL with a wider intercept prior: Laplace allows it
    wide.write_text(load_spec("2pl").text.replace('name = "2pl"', 'name = "2pl-wide"').replace("sigma = 2.0",
                                                                                               "sigma = 3.0"))
    assert main(["compare", str(path), "--specs", f"2pl,{wide}", "--nuts-max-cells", "1000", "--kfold", "never",
                 "--draws", "200", "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "compare: fit method: laplace: 2,400 observed responses exceed --nuts-max-cells 1,000" in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["fit_method"]["method"] == "laplace"
    assert "Laplace approximation" in (tmp_path / "out" / "report.md").read_text()


def test_weights_is_a_declared_option():
    with pytest.raises(ConfigError, match="weights"):
        run_compare_job("unused.csv", "unused", specs=("rasch", "2pl"), weights="bma")


@pytest.mark.slow
def test_cli_reports_both_weights_and_weights_picks_the_column(tmp_path, capsys):
    path = _benchmark_csv(tmp_path, "2pl", 25, 70, seed=12)
    common = ["compare", str(path), "--specs", "rasch,2pl", "--method", "advi", "--kfold", "never",
              "--draws", "200"]
    assert main([*common, "--weights", "stacking", "--out", str(tmp_path / "stack")]) == 0
    assert main([*common, "--out", str(tmp_path / "pbma")]) == 0  # the default
    stack, pbma = (pd.read_csv(tmp_path / name / "compare.csv", index_col="spec") for name in ("stack", "pbma"))
    for table in (stack, pbma):
        for column in ("stacking_weight", "pseudo_bma_plus_weight"):
            assert np.isclose(table[column].sum(), 1)
    # the same fits and elpd: only the weight column follows --weights
    pd.testing.assert_frame_equal(stack.drop(columns="weight"), pbma.drop(columns="weight"))
    assert (stack["weight"] == stack["stacking_weight"]).all()
    assert (pbma["weight"] == pbma["pseudo_bma_plus_weight"]).all()
    assert pbma.loc["2pl", "pseudo_bma_plus_weight"] > 0.9  # the 2PL leads on 2PL data
    summary = json.loads((tmp_path / "pbma" / "summary.json").read_text())
    assert summary["settings"]["weights"] == "pseudo-bma+" and summary["weights"]["weight"] == "pseudo-bma+"
    assert "Bayesian-bootstrap" in summary["weights"]["pseudo_bma_plus_weight"]
    assert "mixture" in summary["weights"]["stacking_weight"]
    report = (tmp_path / "pbma" / "report.md").read_text()
    assert "pseudo_bma_plus_weight" in report and "stacking_weight" in report
    assert "`weight` in compare.csv is the pseudo-BMA+ weight" in report
