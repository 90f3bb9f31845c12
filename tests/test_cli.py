"""The command-line tool: outputs written completely or not at all, never overwritten without
--force, one-line errors instead of tracebacks, declared analyses."""

import json

import pandas as pd
import pytest
import xarray as xr

from bayesirt.jobs.analysis import load_analysis
from bayesirt.cli.main import main
from bayesirt.errors import SpecError

# module fixtures fit models (seconds to minutes under load): the whole module is in the slow tier
pytestmark = pytest.mark.slow

# a short ADVI run: these tests are about the fit command's plumbing (outputs, --force, one-line errors);
# --method map (the MAP-EM job) is tested in test_fit_map.py
FAST = ["--method", "advi", "--advi-iterations", "500", "--draws", "50", "--no-progress"]


@pytest.fixture(scope="module")
def lsat7_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "lsat7"
    assert main(["fit", "lsat7", "--model", "2pl", *FAST, "--out", str(out)]) == 0
    return out


def test_fit_writes_every_output(lsat7_out):
    names = {p.name for p in lsat7_out.iterdir()}
    assert names == {"posterior.nc", "items.csv", "models.csv", "summary.json", "report.md",
                     "item_curves.png", "abilities.png"}
    items = pd.read_csv(lsat7_out / "items.csv")
    assert list(items["item_id"]) == ["Q1", "Q2", "Q3", "Q4", "Q5"]
    for col in ("discrimination_mean", "difficulty_mean", "intercept_mean", "difficulty_q5", "difficulty_q95"):
        assert col in items
    models = pd.read_csv(lsat7_out / "models.csv")
    assert len(models) == 1000 and models["theta_mean"].is_monotonic_decreasing
    report = (lsat7_out / "report.md").read_text()
    assert "## Model ranking" in report and "## Most informative items" in report and "ADVI approximates" in report
    tree = xr.open_datatree(lsat7_out / "posterior.nc", engine="h5netcdf")
    assert tree.posterior["discrimination"].sizes["item"] == 5
    assert json.loads((lsat7_out / "summary.json").read_text())["spec"] == "2pl"
    assert not [p for p in lsat7_out.parent.iterdir() if p.name.startswith(".")]  # no staging left


def test_existing_output_is_not_overwritten_without_force(lsat7_out, capsys):
    before = (lsat7_out / "report.md").read_text()
    assert main(["fit", "lsat7", *FAST, "--out", str(lsat7_out)]) == 3  # output refused
    err = capsys.readouterr().err
    assert "already exists; pass --force to replace it" in err and "Traceback" not in err
    assert (lsat7_out / "report.md").read_text() == before


def test_failed_run_leaves_earlier_result_untouched(lsat7_out, capsys):
    before = (lsat7_out / "items.csv").read_text()
    assert main(["fit", "lsat7", "--model", "no_such_spec", *FAST, "--out", str(lsat7_out), "--force"]) == 2
    assert "unknown model spec 'no_such_spec'" in capsys.readouterr().err
    assert (lsat7_out / "items.csv").read_text() == before


@pytest.mark.slow
def test_force_replaces(tmp_path):
    out = tmp_path / "o"
    assert main(["fit", "lsat6", *FAST, "--out", str(out)]) == 0
    (out / "marker").write_text("old")
    assert main(["fit", "lsat6", *FAST, "--out", str(out), "--force"]) == 0
    assert not (out / "marker").exists()


@pytest.mark.parametrize(
    "data, message",
    [("no_such_file.csv", "no such file"), ("chembnch", "no such file")],
)
def test_bad_data_is_one_line(tmp_path, capsys, data, message):
    assert main(["fit", data, *FAST, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert message in err.lower() and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_datasets_lists_embedded(capsys):
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    assert "chembench" in out and "lsat6" in out and "MIT" in out


@pytest.mark.slow
def test_run_declared_analysis(tmp_path):
    spec = tmp_path / "a.toml"
    spec.write_text(f'[analysis]\nkind = "fit"\ndata = "lsat6"\nmodel = "rasch"\nout = "{tmp_path / "res"}"\n'
                    '[fit]\nmethod = "advi"\nadvi_iterations = 500\ndraws = 50\nseed = 3\n')
    assert main(["run", str(spec), "--no-progress"]) == 0
    assert json.loads((tmp_path / "res" / "summary.json").read_text())["settings"]["seed"] == 3


def test_demo_analysis_is_valid():
    demo = load_analysis("analyses/demo.toml")
    assert demo["data"] == "chembench" and demo["model"] == "2pl" and demo["options"]["method"] == "nuts"


@pytest.mark.parametrize(
    "body, message",
    [
        ('[analysis]\nkind = "cat"\ndata = "x"\nmodel = "2pl"\nout = "o"\n', r"'kind' must be one of \['fit', 'audit', 'safety'\]"),
        ('[analysis]\nkind = "audit"\ndata = "x"\nout = "o"\n[fit]\ndraws = 5\n', r"unknown table\(s\) \['fit'\]"),
        ('[analysis]\nkind = "audit"\ndata = "x"\nout = "o"\n[audit]\ncontrols = 1.5\n', r"\[audit\] The 'controls' parameter of audit must be a positive integer; got 1.5"),
        ('[analysis]\nkind = "audit"\ndata = "x"\nout = "o"\n[simulate]\nn_items = 50\n', r"need data = 'simulate_dif"),
        ('[analysis]\nkind = "fit"\nmodel = "2pl"\nout = "o"\n', r"needs 'data'"),
        ('[analysis]\nkind = "fit"\ndata = "x"\nmodel = "2pl"\nout = "o"\n[fit]\ndraw = 5\n', r"unknown option 'draw'"),
        ('[analysis]\nkind = "fit"\ndata = "x"\nmodel = "2pl"\nout = "o"\n[fit]\ndraws = "5"\n', r"\[fit\] The 'draws' parameter of fit must be a positive integer; got '5'"),
        ("[analysis\n", "not valid TOML"),
    ],
)
def test_malformed_analysis(tmp_path, body, message):
    (tmp_path / "a.toml").write_text(body)
    with pytest.raises(SpecError, match=message):
        load_analysis(tmp_path / "a.toml")


def test_mml_writes_items_models_summary(tmp_path):
    out = tmp_path / "mml"
    assert main(["mml", "lsat6", "--model", "2pl", "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == {"items.csv", "models.csv", "summary.json", "mml.nc", "report.md"}
    items = pd.read_csv(out / "items.csv")
    for col in ("item_id", "discrimination", "discrimination_se", "intercept", "intercept_se", "difficulty", "difficulty_se"):
        assert col in items
    assert "guessing" not in items  # a 2PL has no asymptote columns
    assert list(pd.read_csv(out / "models.csv").columns[:5]) == ["model", "eap", "eap_sd", "map", "map_se"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["loglik"] == pytest.approx(-2466.653, abs=0.005)
    assert summary["aic"] == pytest.approx(-2 * summary["loglik"] + 20)
    assert summary["converged"] and summary["n_parameters"] == 10


@pytest.mark.slow
def test_ladder_and_check_write_their_reports(tmp_path):
    assert main(["ladder", "lsat7", "--out", str(tmp_path / "ladder")]) == 0
    ladder = pd.read_csv(tmp_path / "ladder" / "ladder.csv")
    assert list(ladder["model"]) == ["1pl", "2pl", "3pl", "4pl"]
    assert "boundary" in (tmp_path / "ladder" / "report.md").read_text()
    args = ["check", "lsat6", "--chains", "2", "--draws", "300", "--tune", "300", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "check")]) == 0
    files = {p.name for p in (tmp_path / "check").iterdir()}
    assert {"agreement.csv", "agreement_summary.csv", "agreement.png", "report.md", "posterior.nc", "ml.nc"} <= files
    assert "## Bayes versus MML agreement" in (tmp_path / "check" / "report.md").read_text()


def test_splithalf_bad_top_is_one_line(tmp_path, capsys):
    assert main(["splithalf", "lsat6", "--out", str(tmp_path / "sh"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesirt: error: top must be between 1") and err.count("\n") == 1
    assert not (tmp_path / "sh").exists()


def test_prior_check_on_design_and_on_data(tmp_path, capsys):
    assert main(["prior-check", "--model", "2pl", "--design", "50x20", "--draws", "100", "--out", str(tmp_path / "d")]) == 0
    table = pd.read_csv(tmp_path / "d" / "prior_check.csv")
    assert table["observed"].isna().all() and table["prior_q5"].le(table["prior_q95"]).all()
    assert main(["prior-check", "--model", "rasch", "--data", "lsat7", "--draws", "100", "--out", str(tmp_path / "o")]) == 0
    table = pd.read_csv(tmp_path / "o" / "prior_check.csv").set_index("statistic")
    assert table.loc["mean item proportion correct", "observed"] == pytest.approx(0.741, abs=1e-3)
    assert main(["prior-check", "--out", str(tmp_path / "x")]) == 2
    assert "exactly one of --design" in capsys.readouterr().err


@pytest.mark.slow
def test_ppc_stores_replicates_in_the_posterior_tree(tmp_path):
    out = tmp_path / "ppc"
    args = ["ppc", "lsat6", "--chains", "2", "--draws", "200", "--tune", "200", "--ppc-draws", "100", "--no-progress"]
    assert main([*args, "--out", str(out)]) == 0
    tree = xr.open_datatree(out / "posterior.nc", engine="h5netcdf")
    assert tree["ppc_statistics"]["item_proportion"].sizes["replicate"] == 100
    assert tree["posterior_predictive"]["responses"].shape == (2, 200, 5, 1000)  # every draw replicated
    items = pd.read_csv(out / "ppc_items.csv")
    assert len(items) == 5 and items["x2_ppp"].between(0, 1).all()
    assert "## Posterior predictive checks" in (out / "report.md").read_text()
