"""Harness readers on output the harnesses wrote themselves (tests/fixtures/harness, made by make_*.py there).

lm-evaluation-harness 0.4.13 (its CLI with an offline scripted LM), Inspect AI 0.3.285 (mockllm; a killed
run, errored samples, an errored eval, a rerun, epochs) and HELM 0.5.16 (helm-run, simple_mcqa). The
correct cells are known in advance (``expected.json``); for Inspect, inspect_ai's own reader is the oracle
of bayesirt's (``oracle.json``). Damaged output (0-byte and cut files, a HELM run without
per_instance_stats.json, lm-eval without --log_samples) is made here from copies of the real files.
None of these tests needs a harness installed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesirt.data import load
from bayesirt.data.harness import HarnessWarning, detect_format, is_harness, provenance, read_harness
from bayesirt.data.harness.inspect_logs import read_log
from bayesirt.errors import DataError

FIX = Path(__file__).parent / "fixtures" / "harness"
LM, INSPECT, HELM = FIX / "lmeval", FIX / "inspect", FIX / "helm"
LM_EXP = json.loads((LM / "expected.json").read_text())
IN_EXP = json.loads((INSPECT / "expected.json").read_text())
IN_ORACLE = json.loads((INSPECT / "oracle.json").read_text())
HELM_EXP = json.loads((HELM / "expected.json").read_text())


def cells(ds) -> dict[str, dict[str, int | None]]:
    """{model: {item: 0/1/None}}."""
    out: dict[str, dict[str, int | None]] = {}
    for m in ds["model"].values:
        col = ds["responses"].sel(model=m).values
        out[str(m)] = {str(i): (None if v == -1 else int(v)) for i, v in zip(ds["item"].values, col, strict=True)}
    return out


def merged(*tables: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for table in tables:
        for model, row in table.items():
            out.setdefault(model, {}).update(row)
    return out


def copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def logs(folder: Path, model_key: str) -> list[Path]:
    """The fixture logs of one model (by inspect_ai's reading) in a fixture folder."""
    model = IN_EXP["models"][model_key]
    return [INSPECT / k for k, v in IN_ORACLE.items() if k.startswith(folder.name + "/") and v["model"] == model]


# ---------------------------------------------------------------- lm-evaluation-harness


def lm_truth(models=("org-a/model-a", "org-b/model-b", "org-c/model-c"), mc="acc", gen="strict-match"):
    return {m: {**LM_EXP[mc][m], **LM_EXP[gen][m]} for m in models}


def test_lm_eval_clean_exact():
    ds = read_harness(LM / "clean", filter="strict-match")
    assert cells(ds) == lm_truth()  # 3 models x 13 items, every cell
    assert ds.sizes == {"item": 13, "model": 3}
    assert list(ds["owner"].values) == ["org-a", "org-b", "org-c"]
    prov = provenance(ds)
    assert prov["harness"] == "lm-eval" and prov["harness_version"] == "0.4.13"
    assert prov["tasks"] == {"qa_gen": {"metric": "exact_match", "filter": "strict-match"},
                             "qa_mc": {"metric": "acc", "filter": "none"}}
    assert len(prov["files_read"]) == 6 and prov["files_skipped"] == [] and prov["superseded"] == []
    assert ds.attrs["harness_summary"] == ("lm-eval 0.4.13: 3 run(s), 3 model(s), 2 task(s) (qa_gen, qa_mc), "
                                           "13 items; 6 file(s) read")
    json.dumps(prov)  # JSON-serialisable


def test_lm_eval_per_task_metric_and_filter():
    assert lm_truth(mc="acc_norm") != lm_truth() and lm_truth(gen="flexible-extract") != lm_truth()  # they differ
    ds = read_harness(LM / "clean", metric=["qa_mc=acc_norm"], filter={"qa_gen": "flexible-extract"})
    assert cells(ds) == lm_truth(mc="acc_norm", gen="flexible-extract")
    assert provenance(ds)["tasks"]["qa_mc"] == {"metric": "acc_norm", "filter": "none"}
    # the README's form: a global filter, a metric for one task
    ds = read_harness(LM / "clean", metric="qa_mc=acc_norm", filter="flexible-extract")
    assert cells(ds) == lm_truth(mc="acc_norm", gen="flexible-extract")
    with pytest.raises(DataError, match=r"line 1 has no metric 'acc_norm' \(its metrics: exact_match\); pass "
                                        r"--metric qa_gen=NAME"):
        read_harness(LM / "clean", metric="acc_norm", filter="strict-match")
    with pytest.raises(DataError, match=r"--metric qa_nope=\.\.\. names no task of this output \(tasks: qa_gen, "
                                        r"qa_mc\)"):
        read_harness(LM / "clean", metric="qa_nope=acc", filter="strict-match")
    with pytest.raises(DataError, match=r"task 'qa_gen' is logged under several lm-eval filters .*--filter "
                                        r"qa_gen=NAME"):
        read_harness(LM / "clean")
    with pytest.raises(DataError, match=r"--metric given twice for every task \('acc', 'acc_norm'\)"):
        read_harness(LM / "clean", metric=["acc", "acc_norm"])
    with pytest.raises(DataError, match=r"--metric '=acc': write TASK=NAME"):
        read_harness(LM / "clean", metric="=acc")


def test_lm_eval_reordered_data_refused():
    with pytest.raises(DataError, match=r"task 'qa_mc', doc_id 0: the runs logged different documents "
                                        r"\(org-a/model-a in .*: \{\"question\": \"Colour of the sky\?\".*; "
                                        r"org-c/model-c in .*: \{\"question\": \"Colour of grass\?\""):
        read_harness(LM / "reordered")
    ok = read_harness([LM / "reordered" / "org-a__model-a", LM / "reordered" / "org-b__model-b"])
    assert cells(ok) == {m: LM_EXP["acc"][m] for m in ("org-a/model-a", "org-b/model-b")}


def test_lm_eval_rerun_latest_wins_and_is_named():
    with pytest.warns(HarnessWarning, match=r"lm-eval: 1 file\(s\) of earlier runs superseded .*org-a__model-a/"
                                            r"samples_qa_mc_.*\.jsonl \(by samples_qa_mc_"):
        ds = read_harness(LM / "rerun")
    assert cells(ds) == {"org-a/model-a": LM_EXP["acc"]["org-a/model-a@rerun"],
                         "org-b/model-b": LM_EXP["acc"]["org-b/model-b"]}
    prov = provenance(ds)
    old, new = sorted((LM / "rerun" / "org-a__model-a").glob("samples_*.jsonl"))
    assert prov["superseded"] == [{"path": str(old), "by": str(new)}]
    assert ds.attrs["lm_eval_superseded_files"] == 1


def test_lm_eval_without_log_samples(tmp_path):
    with pytest.raises(DataError, match=r"nosamples/org-b__model-b: an lm-eval results file but no samples_<task>_"
                                        r"<date_id>\.jsonl: lm-eval was run without --log_samples; pass --on-damaged "
                                        r"skip"):
        read_harness(LM / "nosamples")
    out = tmp_path / "out"
    copy(LM / "clean", out)
    copy(LM / "nosamples" / "org-b__model-b", out / "extra" / "org-b__model-b-nosamples")
    with pytest.warns(HarnessWarning, match=r"skipped .*org-b__model-b-nosamples: an lm-eval results file but no "
                                            r"samples"):
        ds = read_harness(out, filter="strict-match", on_damaged="skip")
    assert cells(ds) == lm_truth()
    assert provenance(ds)["files_skipped"] == [{"path": str(out / "extra" / "org-b__model-b-nosamples"),
                                                "reason": "an lm-eval results file but no samples_<task>_<date_id>"
                                                          ".jsonl: lm-eval was run without --log_samples"}]


@pytest.mark.parametrize("damage, message", [
    ("empty", r"the samples file is empty \(0 bytes\)"),
    ("cut", r"line 8 is not valid JSON \(.*\) \(the file is cut short\)"),
    ("lines", r"holds 5 of the 8 documents its results file reports \(n-samples\): the file is cut short"),
])
def test_lm_eval_damaged_samples_file(tmp_path, damage, message):
    out = copy(LM / "clean", tmp_path / "out")
    file = next((out / "org-b__model-b").glob("samples_qa_mc_*.jsonl"))
    text = file.read_text()
    file.write_text({"empty": "", "cut": text[: len(text) - 40], "lines": "".join(text.splitlines(True)[:5])}[damage])
    with pytest.raises(DataError, match=rf"org-b__model-b/samples_qa_mc_.*\.jsonl: {message}; pass --on-damaged skip"):
        read_harness(out, filter="strict-match")
    with pytest.warns(HarnessWarning, match=rf"skipped .*samples_qa_mc_.*\.jsonl: {message}"):
        ds = read_harness(out, filter="strict-match", on_damaged="skip")
    truth = lm_truth()
    truth["org-b/model-b"].update({k: None for k in LM_EXP["acc"]["org-b/model-b"]})  # its qa_mc cells: missing
    assert cells(ds) == truth
    assert [s["path"] for s in provenance(ds)["files_skipped"]] == [str(file)]


def test_lm_eval_results_listing_a_task_without_samples(tmp_path):
    out = copy(LM / "clean", tmp_path / "out")
    next((out / "org-c__model-c").glob("samples_qa_gen_*.jsonl")).unlink()
    with pytest.raises(DataError, match=r"org-c__model-c/results_.*\.json: lists task 'qa_gen' but the run has no "
                                        r"samples_qa_gen_.*\.jsonl \(the run stopped before writing it\)"):
        read_harness(out, filter="strict-match")


def test_lm_eval_parent_folder_searched_recursively(tmp_path):
    copy(LM / "clean", tmp_path / "runs" / "june")
    copy(LM / "rerun", tmp_path / "runs" / "july" / "deep")
    assert detect_format(tmp_path / "runs") == "lm-eval"
    # superseded: June's qa_mc of a and b, and a's first July run
    with pytest.warns(HarnessWarning, match=r"3 file\(s\) of earlier runs superseded"):
        ds = read_harness(tmp_path / "runs", filter="strict-match")
    truth = lm_truth()
    truth["org-a/model-a"].update(LM_EXP["acc"]["org-a/model-a@rerun"])  # the July rerun is the latest
    assert cells(ds) == truth
    assert ds.attrs["harness_summary"].startswith("lm-eval 0.4.13: 6 run(s), 3 model(s), 2 task(s) (qa_gen, qa_mc)")


# ---------------------------------------------------------------- Inspect AI


def inspect_truth(words="words_includes", models="abc"):
    return merged({IN_EXP["models"][k]: IN_EXP["arith"][IN_EXP["models"][k]] for k in models},
                  {IN_EXP["models"][k]: IN_EXP[words][IN_EXP["models"][k]] for k in models})


def test_inspect_reader_agrees_with_inspect_ai_on_every_log():
    """bayesirt's reader (no inspect_ai) sees what inspect_ai's read_eval_log sees in every fixture log."""
    assert len(IN_ORACLE) == 18
    for name, want in IN_ORACLE.items():
        got = read_log(INSPECT / name)
        assert (got["status"], got["eval"]["model"], got["eval"]["task"], got["eval"]["created"]) == (
            want["status"], want["model"], want["task"], want["created"]), name
        assert [{"id": s["id"], "epoch": s["epoch"], "error": (s.get("error") or {}).get("message"),
                 "scores": {k: v["value"] for k, v in (s.get("scores") or {}).items()}}
                for s in got["samples"]] == want["samples"], name


def test_inspect_clean_exact_without_inspect_ai(monkeypatch):
    monkeypatch.setitem(sys.modules, "inspect_ai", None)  # the reader never imports it
    ds = read_harness(INSPECT / "clean")
    assert cells(ds) == inspect_truth()  # 3 models x 10 items (arith in .eval and .json logs)
    assert list(ds["owner"].values) == ["org-a", "org-b", "org-c"]  # the provider mockllm is dropped
    assert ds.attrs["metric"] == "match,includes" and ds.attrs["inspect_unscored_samples"] == 0
    prov = provenance(ds)
    assert prov["harness_version"] == "0.3.285" and len(prov["files_read"]) == 6
    assert prov["tasks"] == {"arith": {"metric": "match"}, "words": {"metric": "includes"}}
    assert cells(read_harness(INSPECT / "clean", metric="words=exact")) == inspect_truth("words_exact")
    with pytest.raises(DataError, match=r"sample 1 \(epoch 1\) has no score from scorer 'exact' \(scorers: match\); "
                                        r"pass metric= one of them \(per task: --metric arith=SCORER\)"):
        read_harness(INSPECT / "clean", metric="exact")


def test_inspect_killed_run_refused_or_read_or_skipped():
    killed = logs(INSPECT / "killed", "b")[0]
    with pytest.raises(DataError, match=rf"{killed.name}: status 'started', not 'success' \(the eval did not "
                                        r"finish; 3 scored sample\(s\) logged\); pass --read-unfinished"):
        read_harness(INSPECT / "killed")
    b = IN_EXP["models"]["b"]
    with pytest.warns(HarnessWarning, match=rf"read 3 scored sample\(s\) of the unfinished log .*{killed.name} "
                                            r"\(status 'started'\)"):
        ds = read_harness(INSPECT / "killed", read_unfinished=True)
    truth = inspect_truth(models="abc")
    truth = {m: {k: v for k, v in row.items() if k.startswith("arith/")} for m, row in truth.items()}
    truth[b].update({"arith/4": None, "arith/5": None, "arith/6": None})
    assert cells(ds) == truth
    assert provenance(ds)["unfinished_read"] == [{"path": str(killed), "status": "started", "scored_samples": 3}]
    with pytest.warns(HarnessWarning, match=rf"skipped .*{killed.name}: status 'started'"):
        ds = read_harness(INSPECT / "killed", on_damaged="skip")
    assert b not in ds["model"].values and ds.sizes["model"] == 2
    assert provenance(ds)["files_skipped"][0]["path"] == str(killed)


def test_inspect_errored_eval_refused():
    with pytest.raises(DataError, match=r"errors/failed/.*\.eval: status 'error', not 'success'"):
        read_harness(INSPECT / "errors")


def test_inspect_errored_samples_named_and_dropped():
    files = [f for k in "abc" for f in logs(INSPECT / "errors", k) if "failed" not in str(f)]
    with pytest.warns(HarnessWarning) as caught:
        ds = read_harness(files)  # drop_empty=True: the default of every reader, load() and the command line
    messages = [str(w.message) for w in caught]
    a, b, c = (IN_EXP["models"][k] for k in "abc")
    assert (f"inspect: 8 errored or unscored sample(s) left missing: {a}: 1 (arith/5); {b}: 1 (arith/5); "
            f"{c}: 6 (arith/1, arith/2, arith/3, arith/4, ...)") in messages
    assert f"inspect: dropped 1 model(s) without any observed response ({c}) and 1 item(s) without any observed " \
           "response (arith/5)" in messages
    assert json.loads(ds.attrs["dropped_models"]) == [c] and json.loads(ds.attrs["dropped_items"]) == ["arith/5"]
    truth = {m: {k: v for k, v in IN_EXP["arith"][m].items() if k != "arith/5"} for m in (a, b)}
    assert cells(ds) == truth
    prov = provenance(ds)
    assert prov["errored_samples"] == {a: ["arith/5"], b: ["arith/5"], c: [f"arith/{i}" for i in range(1, 7)]}
    assert prov["dropped_models"] == [c] and prov["dropped_items"] == ["arith/5"]
    with pytest.raises(DataError, match=rf"model '{c}' has no observed responses"), pytest.warns(HarnessWarning):
        read_harness(files, drop_empty=False)


def test_inspect_rerun_latest_wins():
    first, second = sorted(logs(INSPECT / "rerun", "a"))
    with pytest.warns(HarnessWarning, match=rf"inspect: 1 file\(s\) of earlier runs superseded .*{first.name} "
                                            rf"\(by {second.name}\)"):
        ds = read_harness(INSPECT / "rerun")
    a, b = IN_EXP["models"]["a"], IN_EXP["models"]["b"]
    assert cells(ds) == {a: IN_EXP["arith"][a], b: IN_EXP["arith"][b]}
    assert provenance(ds)["superseded"] == [{"path": str(first), "by": str(second)}]


def test_inspect_epochs_first_last_mean():
    folder = INSPECT / "epochs"
    with pytest.raises(DataError, match=r"6 \(model, item\) pairs have more than one record .*\(epochs > 1\)"):
        read_harness(folder)
    # answers per epoch (make_inspect.EPOCH_ANSWERS): a 1: 2,2,3  2: 3,5,3  3: 4,4,4;  b 1: 0,2,0  2: 3,3,3  3: 9,4,1
    a, b = IN_EXP["models"]["a"], IN_EXP["models"]["b"]
    assert cells(read_harness(folder, aggregate="first")) == {a: {"arith/1": 1, "arith/2": 1, "arith/3": 1},
                                                              b: {"arith/1": 0, "arith/2": 1, "arith/3": 0}}
    assert cells(read_harness(folder, aggregate="last")) == {a: {"arith/1": 0, "arith/2": 1, "arith/3": 1},
                                                             b: {"arith/1": 0, "arith/2": 1, "arith/3": 0}}
    assert cells(read_harness(folder, aggregate="majority")) == {a: {"arith/1": 1, "arith/2": 1, "arith/3": 1},
                                                                 b: {"arith/1": 0, "arith/2": 1, "arith/3": 0}}
    with pytest.raises(DataError, match=r"partial credit, not 0/1 .*--binarize T"):
        read_harness(folder, metric="closeness", aggregate="first")
    # closeness 1/(1+|gap|), means: a 5/6, 2/3, 1; b (1/3+1+1/3)/3 = 5/9, 1, (1/6+1+1/4)/3 = 17/36
    ds = read_harness(folder, metric="closeness", aggregate="mean", binarize=0.5)
    assert cells(ds) == {a: {"arith/1": 1, "arith/2": 1, "arith/3": 1}, b: {"arith/1": 1, "arith/2": 1, "arith/3": 0}}
    assert provenance(ds)["threshold"] == 0.5 and provenance(ds)["aggregate"] == "mean"


@pytest.mark.parametrize("damage, message", [
    ("empty", r"the Inspect log is empty \(0 bytes\)"),
    ("cut", r"the Inspect log is not a complete zip file \(cut short\?\)"),
])
def test_inspect_damaged_logs(tmp_path, damage, message):
    folder = copy(INSPECT / "clean", tmp_path / "logs")
    victim = folder / logs(INSPECT / "clean", "b")[0].name
    data = victim.read_bytes()
    victim.write_bytes(b"" if damage == "empty" else data[: len(data) // 2])
    assert is_harness(victim) and detect_format(folder) == "inspect"
    with pytest.raises(DataError, match=rf"{victim.name}: {message}; pass --on-damaged skip"):
        read_harness(folder)
    with pytest.warns(HarnessWarning, match=rf"skipped .*{victim.name}: {message}"):
        ds = read_harness(folder, on_damaged="skip")
    truth = inspect_truth()
    b = IN_EXP["models"]["b"]
    truth[b].update({k: None for k in IN_EXP["arith"][b]})
    assert cells(ds) == truth


# ---------------------------------------------------------------- HELM


def test_helm_clean_exact():
    ds = read_harness(HELM)
    assert cells(ds) == HELM_EXP  # 4 models x 6 instances, every cell
    assert provenance(ds)["tasks"] == {"simple_mcqa": {"stat": "exact_match"}}
    assert ds.attrs["harness_summary"] == ("helm: 4 run(s), 4 model(s), 1 task(s) (simple_mcqa), 6 items; "
                                           "4 file(s) read")
    assert cells(read_harness(HELM, stat="simple_mcqa=quasi_exact_match")) == HELM_EXP
    with pytest.raises(DataError, match=r"--stat mmlu=\.\.\. names no group of this output \(groups: simple_mcqa\)"):
        read_harness(HELM, stat="mmlu=exact_match")


@pytest.mark.parametrize("damage, message", [
    ("missing", r"HELM run folder without per_instance_stats\.json \(the run stopped before its last write\)"),
    ("empty", r"per_instance_stats\.json is empty \(0 bytes\)"),
    ("cut", r"per_instance_stats\.json is not valid JSON \(.* at line \d+, column \d+\) \(cut short\)"),
])
def test_helm_damaged_run(tmp_path, damage, message):
    suite = copy(HELM / "v1", tmp_path / "benchmark_output" / "runs" / "v1")
    run = suite / "simple_mcqa:model=scripted_model-b"
    stats = run / "per_instance_stats.json"
    if damage == "missing":
        stats.unlink()
    else:
        stats.write_text("" if damage == "empty" else stats.read_text()[:500])
    with pytest.raises(DataError, match=rf"model=scripted_model-b: {message}; pass --on-damaged skip"):
        read_harness(tmp_path / "benchmark_output")
    with pytest.warns(HarnessWarning, match=rf"skipped .*model=scripted_model-b: {message}"):
        ds = read_harness(tmp_path / "benchmark_output", on_damaged="skip")
    assert cells(ds) == {m: v for m, v in HELM_EXP.items() if m != "scripted/model-b"}


def test_helm_rerun_latest_wins(tmp_path):
    runs = tmp_path / "runs"
    copy(HELM / "v1", runs / "v1")
    again = copy(HELM / "v1" / "simple_mcqa:model=scripted_model-c", runs / "v2" / "simple_mcqa:model=scripted_model-c")
    entries = json.loads((again / "per_instance_stats.json").read_text())
    for e in entries:  # the rerun answers everything right
        for s in e["stats"]:
            if s["name"]["name"] == "exact_match":
                s.update(mean=1.0, sum=1.0, min=1.0, max=1.0)
    (again / "per_instance_stats.json").write_text(json.dumps(entries))
    old = runs / "v1" / "simple_mcqa:model=scripted_model-c" / "per_instance_stats.json"
    os.utime(old, (1_700_000_000, 1_700_000_000))
    with pytest.warns(HarnessWarning, match=r"helm: 1 file\(s\) of earlier runs superseded .*v1/simple_mcqa:model="
                                            r"scripted_model-c/per_instance_stats\.json"):
        ds = read_harness(runs)
    assert cells(ds)["scripted/model-c"] == {k: 1 for k in HELM_EXP["scripted/model-c"]}
    assert provenance(ds)["superseded"] == [{"path": str(old), "by": str(again / "per_instance_stats.json")}]


# ---------------------------------------------------------------- detection, load, provenance, owners


def test_mixed_layouts_refused(tmp_path):
    copy(LM / "clean", tmp_path / "all" / "lm")
    copy(INSPECT / "clean", tmp_path / "all" / "inspect")
    with pytest.raises(DataError, match=r"all holds output of several harnesses: inspect \(e\.g\. .*\.eval\); lm-eval "
                                        r"\(e\.g\. .*org-a__model-a\); pass one folder per harness"):
        load(tmp_path / "all")


def test_load_options_and_provenance_roundtrip(tmp_path):
    from bayesirt.data import save_responses

    ds = load(LM / "clean", filter="strict-match", on_damaged="error")
    path = save_responses(ds, tmp_path / "r.nc")
    back = load(path)
    assert provenance(back) == provenance(ds) and back.attrs["harness_summary"] == ds.attrs["harness_summary"]
    with pytest.raises(DataError, match=r"read_unfinished= does not apply to lm-eval output .*it is for Inspect"):
        load(LM / "clean", filter="strict-match", read_unfinished=True)
    with pytest.raises(DataError, match=r"unknown on_damaged rule 'ignore'; pass --on-damaged \{error,skip\}"):
        load(LM / "clean", on_damaged="ignore")


def test_binarize_and_harness_options_on_plain_files(tmp_path):
    wide = tmp_path / "scores.csv"
    wide.write_text("model,q1,q2,q3\norg/a,0.9,0.2,1\norg/b,0.4,,0.5\norg/c,1,0,0\n")
    with pytest.raises(DataError, match=r"values other than 0, 1 or missing \(found '0\.9' at item 'q1', model "
                                        r"'org/a'\).*--binarize T"):
        load(wide)
    ds = load(wide, binarize=0.5)
    assert cells(ds) == {"org/a": {"q1": 1, "q2": 0, "q3": 1}, "org/b": {"q1": 0, "q2": None, "q3": 1},
                         "org/c": {"q1": 1, "q2": 0, "q3": 0}}
    assert ds.attrs["binarize"] == 0.5
    long = tmp_path / "long.parquet"
    pd.DataFrame({"model": ["a", "a", "b", "b"], "item": ["q1", "q2", "q1", "q2"],
                  "correct": [0.9, 0.1, 0.5, 0.7]}).to_parquet(long)
    assert cells(load(long, binarize=0.6)) == {"a": {"q1": 1, "q2": 0}, "b": {"q1": 0, "q2": 1}}
    npz = tmp_path / "r.npz"
    np.savez(npz, responses=np.array([[0.2, 0.8], [1.0, np.nan]]), model_id=np.array(["a", "b"]))
    assert cells(load(npz, binarize=0.5)) == {"a": {"0": 0, "1": 1}, "b": {"0": 1, "1": None}}
    with pytest.raises(DataError, match=r"option\(s\) metric, aggregate do not apply to .*scores\.csv, a wide table "
                                        r"\(it takes: orientation, key, binarize, id_column\); they are for evaluation-"
                                        r"harness output"):
        load(wide, metric="acc", aggregate="mean", binarize=0.5)
    with pytest.raises(DataError, match=r"binarize must be a finite number"):
        load(wide, binarize=float("nan"))
    assert cells(load(wide, binarize=0.5, on_damaged="error", read_unfinished=False)) == cells(ds)  # defaults


def test_owners_of_provider_prefixed_names():
    from bayesirt.data.families import UNKNOWN_OWNER, derive_owner

    ids = ["openai/gpt-4o", "hf/meta-llama/Llama-3.1-8B", "vllm/Qwen/Qwen2-7B-Instruct", "anthropic/claude-3-5-sonnet",
           "openrouter/mistralai/Mistral-7B", "meta-llama/Llama-3.1-8B", "together/google/gemma-2-9b", "GPT-4o",
           "ollama/llama3", "mockllm/org-a/model-a", "models/org/name"]
    assert derive_owner(ids).tolist() == ["openai", "meta-llama", "Qwen", "anthropic", "mistralai", "meta-llama",
                                          "google", UNKNOWN_OWNER, "ollama", "org-a", "models"]


def test_audit_owner_rules_on_harness_names():
    """The audit's owner rules (cap per owner and family, owner-disjoint halves, one representative per owner
    and family) see the hub organisation behind the provider: checkpoints of one organisation served by
    different providers are one owner."""
    from bayesirt.data import make_responses
    from bayesirt.data.populations import audit_population

    models = ["hf/meta-llama/Llama-3.1-8B", "vllm/meta-llama/Llama-3.2-3B", "together/meta-llama/Llama-3-70b",
              "hf/nvidia/Llama-3.1-Nemotron", "vllm/nvidia/Llama-3-ChatQA", "hf/Qwen/Qwen2-7B", "vllm/Qwen/Qwen2-1.5B",
              "hf/unsloth/Qwen2-0.5B", "vllm/unsloth/Qwen2.5-3B", "openrouter/allenai/Llama-3.1-Tulu",
              "hf/allenai/Qwen-x"]
    ds = make_responses(np.random.default_rng(0).integers(0, 2, size=(30, len(models))), model_id=models)
    assert ds["owner"].values.tolist() == ["meta-llama"] * 3 + ["nvidia"] * 2 + ["Qwen"] * 2 + ["unsloth"] * 2 + [
        "allenai"] * 2
    pop = audit_population(ds, owner_cap=2, min_family_size=1)
    assert (pop["status"] == "over owner cap").sum() == 1  # meta-llama's three Llama checkpoints, capped at 2
    assert pop.loc[pop["status"] == "over owner cap", "owner"].tolist() == ["meta-llama"]
    retained = pop[pop["status"] == "retained"]
    assert (retained.groupby("owner")["fold"].nunique() == 1).all()  # whole owners in one half
    assert sorted(retained.loc[retained["representative"], "owner"] + "/" + retained.loc[retained["representative"],
                  "family"]) == ["Qwen/Qwen", "allenai/Llama", "allenai/Qwen", "meta-llama/Llama", "nvidia/Llama",
                                 "unsloth/Qwen"]


# ---------------------------------------------------------------- the README's examples


def readme_examples() -> list[list[str]]:
    """The harness commands of docs/guide/data.md, as argument lists (without .venv/bin/bayesirt)."""
    text = (Path(__file__).parents[1] / "docs" / "guide" / "data.md").read_text()
    block = text.split("Item-level results straight from evaluation harnesses", 1)[1].split("```sh", 1)[1]
    lines = [line.split("  #", 1)[0].split() for line in block.split("```", 1)[0].splitlines() if line.strip()]
    assert all(line[0] == ".venv/bin/bayesirt" for line in lines)
    return [line[1:] for line in lines]


@pytest.mark.slow
def test_readme_harness_examples_run(tmp_path, capsys):
    """Each README example on harness-written output: lm_eval_out/ -> the lm-eval fixtures (arc_easy -> qa_mc),
    logs/ -> the Inspect epochs logs, benchmark_output/runs/v1/ -> 12 copies of the 4 HELM runs under other
    model names (cat needs 12 models). Sampled fits run as --method map, cat with small budgets (test time)."""
    from bayesirt.cli.main import main

    suite = tmp_path / "suite"
    for run in sorted((HELM / "v1").iterdir()):
        for k in range(3):
            spec = json.loads((run / "run_spec.json").read_text())
            name = f"{spec['adapter_spec']['model']}-{k}"
            spec["adapter_spec"]["model"] = spec["adapter_spec"]["model_deployment"] = name
            (suite / f"{run.name}-{k}").mkdir(parents=True)
            (suite / f"{run.name}-{k}" / "run_spec.json").write_text(json.dumps(spec))
            shutil.copy(run / "per_instance_stats.json", suite / f"{run.name}-{k}")
    examples = readme_examples()
    assert len(examples) == 4
    data = {"lm_eval_out/": [LM / "rerun", LM / "clean"], "logs/": [INSPECT / "epochs"],
            "benchmark_output/runs/v1/": [suite]}
    used = {k: 0 for k in data}
    for n, args in enumerate(examples):
        key = args[1]
        args = [str(data[key][used[key]]) if a == key else a.replace("arc_easy=", "qa_mc=") for a in args]
        used[key] += 1
        out = tmp_path / f"out{n}"
        args = [str(out) if a.startswith("outputs/") else a for a in args] + ["--no-progress"]
        args += {"fit": ["--method", "map"], "cat": ["--budgets", "2,4", "--splits", "2", "--random-subsets", "5"]}.get(
            args[0], [])
        assert main(args) == 0, (args, capsys.readouterr().err)
        assert (out / "report.md").is_file()
        if args[0] in ("fit", "mml"):
            reading = json.loads((out / "summary.json").read_text())["reading"]
            assert reading["harness"] in ("lm-eval", "inspect") and reading["files_read"]


# ---------------------------------------------------------------- damage anywhere: a message, never a traceback


@pytest.mark.parametrize("folder, pick", [
    (INSPECT / "clean", "*.eval"), (INSPECT / "clean", "*.json"), (LM / "clean" / "org-a__model-a", "samples_qa_mc_*"),
    (HELM / "v1", "*model-a/per_instance_stats.json"),
])
def test_cut_or_flipped_anywhere(tmp_path, folder, pick):
    """Each harness-written file cut at 12 offsets and with 12 flipped bytes: the folder reads, or is refused with
    a DataError (error) / read with the file skipped (skip); no other exception."""
    rng = np.random.default_rng(0)
    victim_rel = sorted(folder.glob(pick))[0].relative_to(folder)
    data = (folder / victim_rel).read_bytes()
    variants = [data[:int(n)] for n in np.linspace(0, len(data) - 1, 12)]
    for pos in rng.integers(0, len(data), size=12):
        flipped = bytearray(data)
        flipped[pos] ^= 0xFF
        variants.append(bytes(flipped))
    root = folder.parent if folder.name.startswith("org-") else folder
    for n, blob in enumerate(variants):
        work = copy(root, tmp_path / f"v{n}")
        target = work / (folder.relative_to(root) if root != folder else ".") / victim_rel
        target.write_bytes(blob)
        for mode in ("error", "skip"):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", HarnessWarning)
                    read_harness(work, on_damaged=mode, filter="strict-match" if "lmeval" in str(root) else None)
            except DataError as exc:
                assert "\n" not in str(exc)


def test_inspect_without_any_zstd_decoder(monkeypatch):
    for name in ("compression", "zstandard", "numcodecs"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(DataError, match=r"\.eval: this Inspect log is Zstandard-compressed and no Zstandard decoder "
                                        r"is installed; pip install \"bayesirt\[inspect\]\""):
        read_harness(INSPECT / "rerun")
