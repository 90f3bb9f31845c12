"""Family labels of the audit (issue 18, item 1): labels supplied with the data are audited as given
(any strings, case kept), ``--families`` restricts them, ``--derive-families`` applies the NT C.1
rule to the model ids, and the "too few families" message lists the labels seen."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bayesirt.audit import AuditConfig
from bayesirt.jobs.audit import run_audit_job
from bayesirt.jobs.analysis import load_analysis, run_analysis
from bayesirt.cli.main import main
from bayesirt.data import simulate_dif_benchmark
from bayesirt.errors import ConfigError, DataError

QUICK = ["--quick", "--controls", "9", "--composition-bootstrap", "9", "--no-progress"]
NT_NAMES = {"Qwen": "family_0", "Llama": "family_1", "Gemma": "family_2"}
LOWER = {"Qwen": "qwen", "Llama": "GPT", "Gemma": "Claude"}


@pytest.fixture(scope="module")
def bench():
    """90 models (30 owners x Qwen, Llama, Gemma) x 60 items; ids name the NT families."""
    ds, _ = simulate_dif_benchmark(n_owners=30, n_items=60, seed=4)
    return ds


def relabel(bench, names: dict[str, str]) -> np.ndarray:
    return np.array([names[f] for f in bench["family"].values.astype(str)], dtype=str)


@pytest.fixture(scope="module")
def nt_npz(bench, tmp_path_factory):
    """The NT artifact's input contract: responses (items x models), model_id, family, owner, item_group,
    string arrays fixed-width unicode; families family_0..family_2."""
    path = tmp_path_factory.mktemp("nt") / "responses.npz"
    np.savez(path, responses=bench["responses"].values.astype(np.float64),
             model_id=np.asarray(bench["model_id"].values, dtype=str), family=relabel(bench, NT_NAMES),
             owner=np.asarray(bench["owner"].values, dtype=str),
             item_group=np.asarray(bench["item_group"].values, dtype=str))
    with np.load(path, allow_pickle=False) as npz:
        assert {npz[k].dtype.kind for k in ("model_id", "family", "owner", "item_group")} == {"U"}
    return path


def summary_of(out) -> dict:
    return json.loads((out / "summary.json").read_text())


@pytest.mark.slow
def test_nt_contract_npz_audits_its_own_family_labels(nt_npz, tmp_path):
    assert main(["audit", str(nt_npz), "--out", str(tmp_path / "a"), *QUICK]) == 0
    summary = summary_of(tmp_path / "a")
    assert summary["families"] == ["family_0", "family_1", "family_2"]
    assert summary["family_source"] == "supplied"
    assert summary["config"]["families"] is None
    population = pd.read_csv(tmp_path / "a" / "population.csv")
    assert set(population.loc[population["status"] == "retained", "family"]) == set(NT_NAMES.values())
    assert "Families: family_0, family_1, family_2." in (tmp_path / "a" / "report.md").read_text()


def test_families_option_restricts_the_audit(nt_npz, tmp_path):
    assert main(["audit", str(nt_npz), "--out", str(tmp_path / "a"), "--families", "family_2,family_0", *QUICK]) == 0
    summary = summary_of(tmp_path / "a")
    assert summary["families"] == ["family_0", "family_2"]
    assert summary["config"]["families"] == ["family_2", "family_0"]
    population = pd.read_csv(tmp_path / "a" / "population.csv")
    assert set(population.loc[population["family"] == "family_1", "status"]) == {"no family"}


def test_derive_families_applies_the_nt_rule_to_the_model_ids(nt_npz, tmp_path):
    assert main(["audit", str(nt_npz), "--out", str(tmp_path / "a"), "--derive-families", *QUICK]) == 0
    summary = summary_of(tmp_path / "a")
    assert summary["families"] == ["Gemma", "Llama", "Qwen"]
    assert summary["family_source"] == "derived from model ids"
    assert main(["audit", str(nt_npz), "--out", str(tmp_path / "b"), "--derive-families", "--families",
                 "Qwen,Gemma", *QUICK]) == 0
    assert summary_of(tmp_path / "b")["families"] == ["Gemma", "Qwen"]


def test_unknown_label_and_too_few_families_name_the_labels_seen(nt_npz, tmp_path, capsys):
    assert main(["audit", str(nt_npz), "--out", str(tmp_path / "a"), "--families", "Qwen,family_1", *QUICK]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesirt: error: families lists 'Qwen', which no model of the data has (family labels "
                          "present, with models: 'family_0' (30), 'family_1' (30), 'family_2' (30))")
    assert main(["audit", str(nt_npz), "--out", str(tmp_path / "a"), "--min-family-size", "31", *QUICK]) == 2
    err = capsys.readouterr().err
    assert ("only 0 families left after exclusions (family labels seen, models in the data / after the owner cap: "
            "family_0 30 / 30, family_1 30 / 30, family_2 30 / 30; kept: none;") in err
    assert "--min-family-size" in err and "--families" in err and "--derive-families" in err
    assert not (tmp_path / "a").exists()


def test_job_message_with_pytest_raises(bench, tmp_path):
    ds = bench.assign_coords(family=("model", relabel(bench, LOWER)))
    with pytest.raises(DataError, match=r"family labels seen, models in the data / after the owner cap: Claude 30 / 30, "
                                        r"GPT 30 / 30, qwen 30 / 30; kept: none"):
        run_audit_job(ds, tmp_path / "a", config=AuditConfig(quick=True, min_family_size=40), progress=False)


def test_lowercase_labels_from_a_long_file_are_audited_as_given(bench, tmp_path):
    y = bench["responses"].transpose("model", "item").values
    long = pd.DataFrame({"model": np.repeat(bench["model_id"].values, y.shape[1]),
                         "item": np.tile(bench["item_id"].values, y.shape[0]), "correct": y.ravel()})
    long["family"] = np.repeat(relabel(bench, LOWER), y.shape[1])
    long["owner"] = np.repeat(bench["owner"].values, y.shape[1])
    long.to_parquet(tmp_path / "long.parquet")
    assert main(["audit", str(tmp_path / "long.parquet"), "--out", str(tmp_path / "a"), *QUICK]) == 0
    summary = summary_of(tmp_path / "a")
    assert summary["families"] == ["Claude", "GPT", "qwen"] and summary["family_source"] == "supplied"


@pytest.mark.slow
def test_lowercase_labels_from_a_models_csv_are_audited_as_given(bench, tmp_path):
    y = bench["responses"].transpose("model", "item").values
    pd.DataFrame({"model": np.repeat(bench["model_id"].values, y.shape[1]),
                  "item": np.tile(bench["item_id"].values, y.shape[0]),
                  "correct": y.ravel()}).to_csv(tmp_path / "long.csv", index=False)
    pd.DataFrame({"model_id": bench["model_id"].values,
                  "family": relabel(bench, LOWER)}).to_csv(tmp_path / "models.csv", index=False)
    args = ["audit", str(tmp_path / "long.csv"), "--models", str(tmp_path / "models.csv")]
    assert main([*args, "--out", str(tmp_path / "a"), *QUICK]) == 0
    assert summary_of(tmp_path / "a")["families"] == ["Claude", "GPT", "qwen"]
    assert main([*args, "--out", str(tmp_path / "b"), "--families", "qwen,GPT", *QUICK]) == 0
    assert summary_of(tmp_path / "b")["families"] == ["GPT", "qwen"]
    assert main([*args, "--out", str(tmp_path / "c"), "--families", "Qwen", *QUICK]) == 2  # case matters


@pytest.mark.slow
def test_audit_compare_families_and_derived_labels(nt_npz, tmp_path, capsys):
    for side in ("l", "r"):
        assert main(["audit", str(nt_npz), "--out", str(tmp_path / side), *QUICK]) == 0
    left, right = str(tmp_path / "l"), str(tmp_path / "r")
    assert main(["audit-compare", left, right, "--out", str(tmp_path / "all"), "--owner-bootstrap", "9",
                 "--no-progress"]) == 0
    assert set(pd.read_csv(tmp_path / "all" / "common_models.csv")["family"]) == set(NT_NAMES.values())
    assert main(["audit-compare", left, right, "--out", str(tmp_path / "two"), "--owner-bootstrap", "9",
                 "--families", "family_0,family_2", "--no-progress"]) == 0
    assert set(pd.read_csv(tmp_path / "two" / "common_models.csv")["family"]) == {"family_0", "family_2"}
    assert main(["audit-compare", left, right, "--out", str(tmp_path / "nt"), "--owner-bootstrap", "9",
                 "--derive-families", "--no-progress"]) == 0
    assert set(pd.read_csv(tmp_path / "nt" / "common_models.csv")["family"]) == set(NT_NAMES)
    assert "derived from the model ids" in (tmp_path / "nt" / "report.md").read_text()
    assert main(["audit-compare", left, right, "--out", str(tmp_path / "x"), "--owner-bootstrap", "9",
                 "--families", "Qwen", "--no-progress"]) == 2
    assert "families lists 'Qwen', which neither audit scored" in capsys.readouterr().err


def test_declared_analysis_takes_families_and_derive_families(tmp_path):
    spec = tmp_path / "a.toml"
    spec.write_text('[analysis]\nkind = "audit"\ndata = "simulate_dif_benchmark"\nout = "' + str(tmp_path / "o")
                    + '"\n[simulate]\nn_owners = 30\nn_items = 60\nseed = 4\n[audit]\nquick = true\ncontrols = 9\n'
                    'composition_bootstrap = 9\nowner_bootstrap = 9\nfamilies = ["Qwen", "Llama"]\nderive_families = true\n')
    assert load_analysis(spec)["options"]["families"] == ("Qwen", "Llama")
    summary = summary_of(run_analysis(spec, progress=False))
    assert summary["families"] == ["Llama", "Qwen"] and summary["family_source"] == "derived from model ids"


def test_config_families_stay_hashable_and_are_checked():
    config = AuditConfig(families=["qwen", "GPT"], quick=True)
    assert config.families == ("qwen", "GPT") and hash(config) == hash(AuditConfig(families=("qwen", "GPT"), quick=True))
    assert config.resolved().families == ("qwen", "GPT") and AuditConfig().families is None
    for bad in ("qwen", ["qwen", "qwen"], [], ["qwen", 3]):
        with pytest.raises(ConfigError, match="'families' parameter of AuditConfig"):
            AuditConfig(families=bad)
