"""The format registry, and inputs that were read silently or pointed the wrong way (issue 42, items 6-8),
each through the command line on a small file like the one that showed it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bayesirt.cli.main import main
from bayesirt.data import load
from bayesirt.data.harness import FORMATS, READING_OPTIONS, provenance
from bayesirt.data.harness.layout import harness_formats
from bayesirt.data.io import READ_OPTIONS
from bayesirt.data.registry import readers

TS = "2026-11-30T09-15-00.000001"
RNG = np.random.default_rng(42)
CORRECT = RNG.random((5, 8)) < 0.55  # 5 models x 8 items, the truth of every file below
CORRECT[:, 0], CORRECT[:, 1] = True, False  # an easy and a hard item
CORRECT[0, 2] = CORRECT[4, 3] = True


def _mml(tmp_path, source, *flags):
    return main(["mml", str(source), *flags, "--out", str(tmp_path / "out"), "--no-progress"])


# ------------------------------------------------------------------------------------------------ registry
def test_read_options_are_the_union_of_what_the_formats_declare():
    declared = {o.name for r in readers() for o in r.options}
    assert set(READ_OPTIONS) == declared | {"drop_empty", "keep_empty"}
    assert {r.kind for r in readers()} == {"evaluation-harness output", "response folder", "saved .nc response file",
                                           "NPY matrix", "NPZ archive", "long table", "wide table"}
    assert [r.order for r in readers()] == sorted(r.order for r in readers())  # asked in detection order
    # each harness is one module: its own options reach the command line through the registry
    assert set(FORMATS) == {h.name for h in harness_formats()} == {"lm-eval", "inspect", "helm"}
    own = {o.name for h in harness_formats() for o in h.options}
    assert own == {"metric", "filter", "stat", "read_unfinished"} and own <= set(READING_OPTIONS) <= set(READ_OPTIONS)


def test_every_reading_option_is_a_flag_of_a_command_that_reads_data(capsys):
    with pytest.raises(SystemExit):
        main(["mml", "--help"])
    text = capsys.readouterr().out
    for opt in READ_OPTIONS.values():
        assert opt.cli_flag in text, opt.name
    assert "--refuse-empty" in text and "deprecated spelling of --refuse-empty" in text


# ------------------------------------------------------------------------------ 42.7: long CSV, optional columns
def test_long_csv_with_optional_columns_is_read_as_long(tmp_path):
    """The README's long format with item_group, family and owner columns: read as long, like Parquet."""
    rows = ["model,item,correct,item_group,family,owner"]
    for m in range(5):
        for i in range(8):
            rows.append(f"org{m % 2}/m{m},q{i},{int(CORRECT[m, i])},{'math' if i < 4 else 'law'},"
                        f"fam{m % 2},org{m % 2}")
    csv = tmp_path / "long.csv"
    csv.write_text("\n".join(rows) + "\n")
    assert _mml(tmp_path, csv) == 0  # was: "duplicate model id" (read as a wide file)
    ds = load(csv)
    assert ds.sizes == {"item": 8, "model": 5}
    assert list(ds["item_group"].values) == ["math"] * 4 + ["law"] * 4
    assert list(ds["family"].values) == ["fam0", "fam1", "fam0", "fam1", "fam0"]
    assert (ds["responses"].values == CORRECT.T).all()
    parquet = tmp_path / "long.parquet"
    __import__("pandas").read_csv(csv).to_parquet(parquet)
    same = load(parquet)  # one rule for both
    assert (same["responses"].values == ds["responses"].values).all()
    assert list(same["owner"].values) == list(ds["owner"].values)


# ---------------------------------------------------------------------------- 42.8: multiple-choice codes
@pytest.mark.parametrize("cells", ["codes", "letters"])
@pytest.mark.slow
def test_multiple_choice_answers_point_to_an_answer_key(tmp_path, capsys, cells):
    answers = RNG.integers(0, 5, size=(5, 8))
    text = (answers.astype(str) if cells == "codes" else np.array(list("ABCDE"))[answers])
    wide = tmp_path / "answers.csv"
    wide.write_text("model," + ",".join(f"q{i}" for i in range(8)) + "\n"
                    + "".join(f"org/m{m}," + ",".join(text[m]) + "\n" for m in range(5)))
    assert _mml(tmp_path, wide) == 2
    err = capsys.readouterr().err
    assert "they look like multiple-choice answers: pass --key KEY.csv" in err  # the right fix, named first
    assert "--binarize" not in err
    key = tmp_path / "key.csv"
    key.write_text("item_id,key\n" + "".join(f"q{i},{text[0, i]}\n" for i in range(8)))
    assert _mml(tmp_path, wide, "--key", str(key)) == 0


# --------------------------------------------------------------------------------------- 42.6: lm-eval
def _lm_folder(out, folder, *, results=True, metrics=("acc",), predict_only=False):
    d = out / folder
    d.mkdir(parents=True)
    m = int(folder.rsplit("m", 1)[-1])
    with open(d / f"samples_quiz_{TS}.jsonl", "w") as fh:
        for i in range(8):
            record = {"doc_id": i, "doc": {"q": f"question {i}"}, "target": "1", "filter": "none",
                      "doc_hash": f"{i:064d}"}
            if predict_only:  # what lm_eval --predict_only logs: the bypass metric, no score
                record.update(metrics=["bypass"], bypass=None)
            else:
                record.update(metrics=list(metrics), **{k: float(CORRECT[m, i]) for k in metrics})
            fh.write(json.dumps(record) + "\n")
    if results:
        (d / f"results_{TS}.json").write_text(json.dumps({
            "results": {"quiz": {}}, "configs": {"quiz": {}}, "n-samples": {"quiz": {"original": 8, "effective": 8}},
            "model_name": f"org/{folder.split('__')[-1]}", "lm_eval_version": "0.4.13"}))
    return d


def test_lm_eval_folder_without_results_json_is_refused_naming_it(tmp_path, capsys):
    out = tmp_path / "lm"
    for m in range(4):
        _lm_folder(out, f"org__m{m}")
    lost = _lm_folder(out, "org__m4", results=False)  # its results JSON is gone
    assert _mml(tmp_path, out) == 2  # was: exit 0 with a model 'org__m4' whose owner is unknown
    err = capsys.readouterr().err
    assert f"{lost}: samples files but no results_<date_id>.json: the run's model name (and owner) is unknown" in err
    assert "--on-damaged skip" in err
    assert not (tmp_path / "out").exists()
    assert _mml(tmp_path, out, "--on-damaged", "skip") == 0  # the rest, with the folder named as skipped
    assert "skipped" in capsys.readouterr().err


def test_lm_eval_predict_only_run_is_named_at_once(tmp_path, capsys):
    out = tmp_path / "lm"
    for m in range(5):
        _lm_folder(out, f"org__m{m}", predict_only=True)
    assert _mml(tmp_path, out) == 2
    err = capsys.readouterr().err
    assert "the run was made with lm_eval --predict_only: it logged the model's outputs but no scores" in err
    assert _mml(tmp_path, out, "--metric", "acc") == 2  # the user's next try gets the same answer, not a riddle
    assert "--predict_only" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ 42.6: HELM
def _helm_run(suite, m, *, method="multiple_choice_joint", perturbed=True):
    model = f"org/m{m}"
    name = f"mmlu:subject=anatomy,method={method},model=org_m{m}"
    d = suite / name
    d.mkdir(parents=True)
    (d / "run_spec.json").write_text(json.dumps({
        "name": name, "scenario_spec": {"class_name": "helm.benchmark.scenarios.mmlu_scenario.MMLUScenario",
                                        "args": {"subject": "anatomy"}},
        "adapter_spec": {"method": method, "model": model, "model_deployment": model}}))

    def stat(value, perturbation=None):
        name = {"name": "exact_match", "split": "test", **({"perturbation": perturbation} if perturbation else {})}
        return {"name": name, "count": 1, "sum": value, "mean": value}

    mix = {"name": "mild_mix", "robustness": True, "fairness": False, "computed_on": "perturbed"}
    entries = []
    for i in range(8):
        entries.append({"instance_id": f"id{i}", "train_trial_index": 0, "stats": [stat(float(CORRECT[m, i]))]})
        if perturbed:  # HELM's robustness copy of the instance: another question
            entries.append({"instance_id": f"id{i}", "train_trial_index": 0, "perturbation": mix,
                            "stats": [stat(0.0, mix)]})
    (d / "per_instance_stats.json").write_text(json.dumps(entries))


@pytest.mark.slow
def test_helm_perturbed_records_are_counted_and_the_version_is_said(tmp_path, capsys):
    suite = tmp_path / "runs" / "v1"
    for m in range(5):
        _helm_run(suite, m)
    assert _mml(tmp_path, suite) == 0
    err = capsys.readouterr().err
    assert ("40 perturbed instance record(s) not read (40 mild_mix): a perturbation changes the question, so only "
            "unperturbed instances are items") in err  # the console line; the report shows the same summary
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert "40 perturbed instance record(s) not read" in json.dumps(summary)
    prov = provenance(load(suite))
    assert prov["remarks"] and prov["harness_version"] == "not recorded (HELM writes no version into its run folders)"


def test_helm_instances_under_two_run_specs_are_named(tmp_path, capsys):
    suite = tmp_path / "runs" / "v1"
    for m in range(5):
        _helm_run(suite, m, perturbed=False)
        _helm_run(suite, m, method="multiple_choice_separate_original", perturbed=False)
    assert _mml(tmp_path, suite) == 0
    err = capsys.readouterr().err
    assert ("the same scenario instances are read under several run specs (mmlu:subject=anatomy,method="
            "multiple_choice_joint and mmlu:subject=anatomy,method=multiple_choice_separate_original): each run spec "
            "makes its own items") in err
    assert load(suite).sizes["item"] == 16  # read as they are, but never unremarked


def test_a_long_table_with_other_column_names_gets_a_hint(tmp_path):
    """A long file whose columns are model_id, item_id, correct is read as wide (a long table needs model, item,
    correct) and fails on repeated model ids: the error says how to read it as long."""
    from bayesirt.errors import DataError

    path = tmp_path / "long.csv"
    path.write_text("model_id,item_id,correct\nm1,i1,1\nm1,i2,0\nm2,i1,1\nm2,i2,1\n")
    with pytest.raises(DataError, match="duplicate model id.*needs the columns model, item and correct"):
        load(path)
    assert load(path, model="model_id", item="item_id").sizes == {"item": 2, "model": 2}
    wide = tmp_path / "wide.csv"
    wide.write_text("model,q1,q2\nm1,1,0\nm1,0,1\n")
    with pytest.raises(DataError, match="duplicate model id") as err:
        load(wide)
    assert "long table" not in str(err.value)  # no item column: no hint
