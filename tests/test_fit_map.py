"""``bayesirt fit --method map`` (issue 18 item 6): the marginal MAP of the item parameters under the
spec's priors (MAP-EM, abilities integrated out), the same files and numbers as ``bayesirt mml
--priors``, with observed-information standard errors and tables of estimates and SEs. The joint
MAP over abilities and items, which diverges on short tests (LSAT6 discriminations of 3 to several
hundred), is not offered (``fit(method="map")`` is refused: test_inference.py)."""

import json

import numpy as np
import pandas as pd
import pytest

from bayesirt.cli.main import main
from bayesirt.data import load_dataset
from bayesirt.frequentist import fit_mml

# LSAT6 2PL by marginal ML, R ltm (21-point Gauss-Hermite): the reference of test_mml.py
LSAT6_A = [0.8254, 0.7229, 0.8905, 0.6886, 0.6575]
LSAT6_B = [-3.3597, -1.3696, -0.2799, -1.8659, -3.1236]
MML_FILES = {"items.csv", "models.csv", "summary.json", "mml.nc", "report.md"}
QUIET = ["--no-progress"]


@pytest.fixture(scope="module")
def lsat6_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("map")
    assert main(["fit", "lsat6", "--model", "2pl", "--method", "map", *QUIET, "--out", str(root / "fit")]) == 0
    assert main(["mml", "lsat6", "--model", "2pl", "--priors", "--out", str(root / "mml")]) == 0
    return root / "fit", root / "mml"


def test_lsat6_map_equals_mml_with_priors(lsat6_runs):
    fit_out, mml_out = lsat6_runs
    assert {p.name for p in fit_out.iterdir()} == MML_FILES  # no posterior.nc: there are no draws
    items = pd.read_csv(fit_out / "items.csv")
    for name in ("items.csv", "models.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(fit_out / name), pd.read_csv(mml_out / name),
                                      check_exact=False, rtol=0, atol=1e-8)
    assert list(items["item_id"]) == ["Q1", "Q2", "Q3", "Q4", "Q5"]
    # near the published MML (the priors shrink a little); the joint MAP gave a = 3.4 ... several hundred
    np.testing.assert_array_less(np.abs(items["discrimination"] - LSAT6_A), 0.1)
    np.testing.assert_array_less(np.abs(items["difficulty"] - LSAT6_B), 0.25)
    for name in ("discrimination_se", "intercept_se", "difficulty_se"):
        assert np.isfinite(items[name]).all() and (items[name] > 0).all(), name
    models = pd.read_csv(fit_out / "models.csv")
    assert len(models) == 1000 and list(models.columns[:5]) == ["model", "eap", "eap_sd", "map", "map_se"]
    assert (models["eap_sd"] > 0).all() and (models["map_se"] > 0).all()


def test_lsat6_map_summary_and_report_say_estimate_and_se(lsat6_runs):
    fit_out, _ = lsat6_runs
    summary = json.loads((fit_out / "summary.json").read_text())
    assert summary["method"] == "map" and summary["priors"] and summary["converged"]
    assert "marginal MAP" in summary["estimator"] and "MAP-EM" in summary["estimator"]
    assert summary["data"] == "lsat6" and summary["spec"] == "2pl" and "ignored_options" not in summary
    report = (fit_out / "report.md").read_text()
    assert report.startswith("# Marginal MAP (MAP-EM), ")
    assert "## Marginal MAP of the item parameters (MAP-EM)" in report and "not a joint mode" in report
    assert "| item | discrimination estimate | discrimination SE | difficulty estimate | difficulty SE |" in report
    items = pd.read_csv(fit_out / "items.csv")
    q3 = items.iloc[2]
    row = f"| Q3 | {q3.discrimination:.3f} | {q3.discrimination_se:.3f} | {q3.difficulty:.3f} | {q3.difficulty_se:.3f} |"
    assert row in report
    assert "90%" not in report and "_q5" not in report  # no interval columns


def test_map_ignores_sampling_options_and_says_so(tmp_path):
    out = tmp_path / "rasch"
    with pytest.warns(UserWarning, match=r"method 'map' \(marginal MAP, MAP-EM\) ignores draws=50, seed=3 "):
        assert main(["fit", "lsat6", "--model", "rasch", "--method", "map", "--draws", "50", "--seed", "3", *QUIET,
                     "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ignored_options"] == {"draws": 50, "seed": 3}
    assert "Ignored options" in (out / "report.md").read_text()
    reference = fit_mml(load_dataset("lsat6"), "rasch", priors=True).items
    items = pd.read_csv(out / "items.csv")
    np.testing.assert_allclose(items["difficulty"], reference["difficulty"], rtol=0, atol=1e-8)
    assert np.ptp(items["discrimination"]) == 0  # one shared slope


@pytest.mark.parametrize("spec", ["mirt", "mirt-confirmatory"])
def test_mirt_map_is_refused_in_one_line(tmp_path, capsys, spec):
    out = tmp_path / "x"
    assert main(["fit", "lsat6", "--model", spec, "--method", "map", *QUIET, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "MIRT" in err and "--method advi" in err
    assert not out.exists()


def test_other_commands_do_not_offer_map(tmp_path, capsys):
    """map is the fit command's MAP-EM job; the commands that sample (check, ppc, compare) refuse it."""
    with pytest.raises(SystemExit) as err:
        main(["check", "lsat6", "--method", "map", "--out", str(tmp_path / "c")])
    assert err.value.code == 2 and "invalid choice: 'map'" in capsys.readouterr().err


def test_analysis_file_map_runs_map_em(tmp_path):
    spec = tmp_path / "a.toml"
    spec.write_text(f'[analysis]\nkind = "fit"\ndata = "lsat6"\nmodel = "2pl"\nout = "{tmp_path / "res"}"\n'
                    '[fit]\nmethod = "map"\n')
    assert main(["run", str(spec), "--no-progress"]) == 0
    out = tmp_path / "res"
    assert {p.name for p in out.iterdir()} == MML_FILES
    assert json.loads((out / "summary.json").read_text())["method"] == "map"
    reference = fit_mml(load_dataset("lsat6"), "2pl", priors=True).items
    items = pd.read_csv(out / "items.csv")
    for name in ("discrimination", "difficulty", "discrimination_se", "difficulty_se"):
        np.testing.assert_allclose(items[name], reference[name], rtol=0, atol=1e-8, err_msg=name)
