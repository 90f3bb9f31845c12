"""Readers of evaluation-harness output (bayesirt.data.harness) on small files in the real layouts.

lm-eval fixtures mirror lm_eval 0.4.13 (loggers/evaluation_tracker.py, evaluator.py); HELM fixtures
mirror crfm-helm 0.5.16 (benchmark/runner.py, metrics/statistic.py); Inspect logs are written by
inspect_ai's own write_eval_log.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from bayesirt.data.harness import HarnessWarning, Record, build_dataset, detect_format, is_harness, read_harness
from bayesirt.data.harness.helm import read_helm
from bayesirt.data.harness.inspect_logs import read_inspect
from bayesirt.data.harness.lm_eval import read_lm_eval
from bayesirt.errors import DataError

TS1, TS2 = "2024-05-13T12-34-56.789012", "2024-06-01T08-00-00.000001"


def cells(ds):
    """Responses as a list of lists with None for missing."""
    return [[None if v == -1 else int(v) for v in row] for row in ds["responses"].values]


# ---------------------------------------------------------------- records: the shared rules


def recs(*rows):
    return [Record(m, i, "g", s) for m, i, s in rows]


REPEATS = recs(("a", "q1", 1), ("a", "q1", 0), ("a", "q1", 1), ("a", "q2", 0), ("b", "q1", 1), ("b", "q2", 1),
               ("b", "q2", 0))


def test_records_pivot_first_appearance_order_and_attrs():
    ds = build_dataset(recs(("m2", "x", 1), ("m1", "y", 0), ("m1", "x", 1)), harness="test", source="src")
    assert list(ds["model"].values) == ["m2", "m1"]
    assert list(ds["item"].values) == ["x", "y"]
    assert cells(ds) == [[1, 1], [None, 0]]
    assert ds.attrs["harness"] == "test" and ds.attrs["aggregate"] == "none" and ds.attrs["binarize"] == "none"
    assert ds.attrs["repeated_pairs"] == 0 and ds.attrs["n_records"] == 3 and ds.attrs["source"] == "src"


def test_records_refuse_repeats_without_rule():
    with pytest.raises(DataError, match=r"src: 2 \(model, item\) pairs have more than one record .*--aggregate "
                                        r"\{mean,majority,first,last\}"):
        build_dataset(REPEATS, harness="t", source="src")


def test_records_aggregate_rules():
    first = build_dataset(REPEATS, harness="t", aggregate="first")
    assert cells(first) == [[1, 1], [0, 1]] and first.attrs["aggregate"] == "first"
    assert first.attrs["repeated_pairs"] == 2
    majority = build_dataset(REPEATS, harness="t", aggregate="majority")  # b/q2 is a 1-1 tie -> 1
    assert cells(majority) == [[1, 1], [0, 1]]
    mean = build_dataset(REPEATS, harness="t", aggregate="mean", binarize=0.6)  # a/q1 2/3, b/q2 1/2
    assert cells(mean) == [[1, 1], [0, 0]] and mean.attrs["binarize"] == 0.6
    with pytest.raises(DataError, match="aggregate='mean' gives fractions.*--binarize T"):
        build_dataset(REPEATS, harness="t", aggregate="mean")
    with pytest.raises(DataError, match="unknown aggregate rule 'median'"):
        build_dataset(REPEATS, harness="t", aggregate="median")


def test_records_partial_credit_needs_binarize():
    partial = recs(("a", "q1", 0.5), ("a", "q2", 1), ("b", "q1", 0.25), ("b", "q2", 0))
    with pytest.raises(DataError, match=r"2 of 4 scores are partial credit.*0\.5 for model 'a', item 'q1'.*--binarize"):
        build_dataset(partial, harness="t")
    assert cells(build_dataset(partial, harness="t", binarize=0.5)) == [[1, 0], [1, 0]]
    with pytest.raises(DataError, match="binarize must be a number"):
        build_dataset(partial, harness="t", binarize="0.5")


def test_records_majority_binarizes_each_record_first():
    rows = recs(("a", "q1", 0.9), ("a", "q1", 0.2), ("a", "q1", 0.3), ("a", "q2", 1), ("b", "q1", 1), ("b", "q2", 0))
    assert cells(build_dataset(rows, harness="t", aggregate="majority", binarize=0.5)) == [[0, 1], [1, 0]]


def test_records_need_two_models():
    with pytest.raises(DataError, match=r"2 item\(s\) x 1 model\(s\).*2 or more models"):
        build_dataset(recs(("a", "q1", 1), ("a", "q2", 0)), harness="t")


# ---------------------------------------------------------------- lm-evaluation-harness


def lm_record(task, doc_id, *, filt="none", **metrics):
    """One samples_*.jsonl record with the fields lm_eval/evaluator.py writes (after save_results_samples)."""
    generate = "exact_match" in metrics
    args = {"gen_args_0": {"arg_0": f"Question {doc_id}?\nAnswer:", "arg_1": {"until": ["Question:"]} if generate
                           else " yes"}}
    return {
        "doc_id": doc_id,
        "doc": {"question": f"Question {doc_id}?", "answer": "yes"},
        "target": "0",
        "arguments": args,
        "resps": [["42"]] if generate else [[["-1.25", "True"]]],
        "filtered_resps": ["42"] if generate else [["-1.25", "True"]],
        "filter": filt,
        "metrics": list(metrics),
        "doc_hash": "a" * 64,
        "prompt_hash": "b" * 64,
        "target_hash": "c" * 64,
        **metrics,
    }


def write_lm_run(out, folder, tasks, *, ts=TS1, results=None):
    """OUT/<folder>/results_<ts>.json and one samples_<task>_<ts>.jsonl per task."""
    d = Path(out) / folder
    d.mkdir(parents=True, exist_ok=True)
    if results is not False:
        name = folder.replace("__", "/")
        body = {
            "results": {t: {"alias": t} for t in tasks},
            "configs": {t: {"task": t} for t in tasks},
            "versions": {t: 1.0 for t in tasks},
            "config": {"model": "hf", "model_args": f"pretrained={name},dtype=float16", "batch_size": 1},
            "git_hash": "0123abc",
            "date": 1715603696.0,
            "task_hashes": {},
            "model_source": "hf",
            "model_name": name,
            "model_name_sanitized": folder,
        }
        body.update(results or {})
        body = {k: v for k, v in body.items() if v is not None}
        (d / f"results_{ts}.json").write_text(json.dumps(body, indent=2))
    for task, records in tasks.items():
        with open(d / f"samples_{task}_{ts}.jsonl", "w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in records)
    return d


ARC_A = [lm_record("arc_easy", 0, acc=1.0, acc_norm=0.0), lm_record("arc_easy", 1, acc=0.0, acc_norm=1.0)]
ARC_B = [lm_record("arc_easy", 1, acc=1.0, acc_norm=1.0), lm_record("arc_easy", 0, acc=1.0, acc_norm=1.0)]
MMLU_A = [lm_record("mmlu_abstract_algebra", 7, acc=1.0, acc_norm=1.0)]


@pytest.fixture
def lm_out(tmp_path):
    out = tmp_path / "out"
    write_lm_run(out, "org__model-a", {"arc_easy": ARC_A, "mmlu_abstract_algebra": MMLU_A})
    write_lm_run(out, "org__model-b", {"arc_easy": ARC_B}, ts=TS2)
    return out


def test_lm_eval_reads_output_folder(lm_out):
    ds = read_lm_eval(lm_out)
    assert list(ds["model"].values) == ["org/model-a", "org/model-b"]
    assert list(ds["item"].values) == ["arc_easy/0", "arc_easy/1", "mmlu_abstract_algebra/7"]
    assert list(ds["item_group"].values) == ["arc_easy", "arc_easy", "mmlu_abstract_algebra"]
    assert cells(ds) == [[1, 1], [0, 1], [1, None]]
    assert ds.attrs["harness"] == "lm-eval" and ds.attrs["metric"] == "acc" and ds.attrs["filter"] == "none"
    assert ds.attrs["lm_eval_superseded_files"] == 0 and ds.attrs["name"] == "out"
    assert cells(read_lm_eval(lm_out, metric="acc_norm")) == [[0, 1], [1, 1], [1, None]]
    assert cells(read_harness(lm_out)) == cells(ds) and detect_format(lm_out) == "lm-eval"


def test_lm_eval_model_folders_as_paths(lm_out):
    ds = read_harness([lm_out / "org__model-b", lm_out / "org__model-a"])
    assert list(ds["model"].values) == ["org/model-b", "org/model-a"]
    with pytest.raises(DataError, match=r"1 model\(s\) \(org/model-a\)"):
        read_lm_eval(lm_out / "org__model-a")


def test_lm_eval_missing_metric_names_file_and_line(lm_out):
    with pytest.raises(DataError, match=r"samples_arc_easy_2024-05-13T12-34-56\.789012\.jsonl: line 1 has no metric "
                                        r"'exact_match' \(its metrics: acc, acc_norm\)"):
        read_lm_eval(lm_out, metric="exact_match")


def test_lm_eval_bad_json_line_3(tmp_path):
    d = write_lm_run(tmp_path / "out", "org__a", {"arc_easy": ARC_A})
    write_lm_run(tmp_path / "out", "org__b", {"arc_easy": ARC_B})
    f = d / f"samples_arc_easy_{TS1}.jsonl"
    f.write_text(f.read_text() + '{"doc_id": 2, "acc": \n')
    with pytest.raises(DataError, match=r"org__a/samples_arc_easy_.*\.jsonl: line 3 is not valid JSON"):
        read_harness(tmp_path / "out")


def test_lm_eval_non_numeric_metric(tmp_path):
    rows = [dict(lm_record("x", 0, acc=1.0), f1=["A", "B"], metrics=["f1", "acc"])] * 2
    write_lm_run(tmp_path, "a", {"x": rows})
    write_lm_run(tmp_path, "b", {"x": rows})
    with pytest.raises(DataError, match=r"line 1: metric 'f1' is \[\"A\", \"B\"\], not a finite number"):
        read_lm_eval(tmp_path)


def test_lm_eval_model_name_fallbacks(tmp_path):
    tasks = {"arc_easy": ARC_A}
    write_lm_run(tmp_path, "org__str", tasks, results={"model_name": None})  # -> model_args string
    write_lm_run(tmp_path, "org__dict", tasks, results={"model_name": None, "config": {"model_args": {
        "pretrained": "org/from-dict", "dtype": "bfloat16"}}})
    write_lm_run(tmp_path, "org__bare", tasks, results={"model_name": None, "config": {"model": "hf"}})
    write_lm_run(tmp_path, "no_results", tasks, results=False)
    # a folder without its results JSON is refused (its model is unknown), naming the folder and what is missing
    with pytest.raises(DataError, match=r"no_results: samples files but no results_<date_id>\.json: the run's model "
                                        r"name \(and owner\) is unknown"):
        read_lm_eval(tmp_path)
    with pytest.warns(HarnessWarning, match=r"skipped .*no_results"):
        ds = read_lm_eval(tmp_path, on_damaged="skip")
    # folders in name order; no model_name -> model_args (string or dict) -> folder name
    assert list(ds["model"].values) == ["org__bare", "org/from-dict", "org/str"]


def test_lm_eval_results_json_output_path_variant(tmp_path):
    """--output_path run.json: results in <dir>/run_<ts>.json beside the samples."""
    for folder, name, ts in (("a", "org/a", TS1), ("b", "org/b", TS2)):
        d = write_lm_run(tmp_path, folder, {"arc_easy": ARC_A}, ts=ts, results=False)
        (d / f"run_{ts}.json").write_text(json.dumps({"model_name": name}))
    assert list(read_lm_eval(tmp_path)["model"].values) == ["org/a", "org/b"]


def test_lm_eval_latest_timestamp_wins(lm_out):
    newer = [lm_record("arc_easy", 0, acc=0.0, acc_norm=0.0), lm_record("arc_easy", 1, acc=0.0, acc_norm=0.0)]
    write_lm_run(lm_out, "org__model-a", {"arc_easy": newer}, ts=TS2)
    with pytest.warns(RuntimeWarning, match=r"1 file\(s\) of earlier runs superseded .*samples_arc_easy_2024-05-13"):
        ds = read_lm_eval(lm_out)
    assert cells(ds) == [[0, 1], [0, 1], [1, None]]
    assert ds.attrs["lm_eval_superseded_files"] == 1


def test_lm_eval_filters(tmp_path):
    def gsm(strict, flexible):
        return [r for i, (s, f) in enumerate(zip(strict, flexible, strict=True)) for r in (
            lm_record("gsm8k", i, filt="strict-match", exact_match=s),
            lm_record("gsm8k", i, filt="flexible-extract", exact_match=f))]
    write_lm_run(tmp_path, "org__a", {"gsm8k": gsm([0.0, 1.0], [1.0, 1.0]), "arc_easy": ARC_A})
    write_lm_run(tmp_path, "org__b", {"gsm8k": gsm([0.0, 0.0], [0.0, 1.0])})
    with pytest.raises(DataError, match=r"task 'gsm8k' is logged under several lm-eval filters "
                                        r"\('strict-match', 'flexible-extract'\); pass --filter"):
        read_lm_eval(tmp_path)
    ds = read_harness(tmp_path, filter="flexible-extract", drop_empty=True)
    assert list(ds["item"].values) == ["arc_easy/0", "arc_easy/1", "gsm8k/0", "gsm8k/1"]
    assert cells(ds) == [[1, None], [0, None], [1, 0], [1, 1]]
    assert ds.attrs["filter"] == "none,flexible-extract" and ds.attrs["metric"] == "acc,exact_match"
    with pytest.raises(DataError, match=r"task 'gsm8k' has no records for filter 'strict' \(filters: strict-match, "):
        read_lm_eval(tmp_path, filter="strict")


def test_lm_eval_empty_and_results_only_folders(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no lm-eval samples files in .*empty \(folder\).*--log_samples"):
        read_lm_eval(tmp_path / "empty")
    with pytest.raises(DataError, match=r"empty is not evaluation-harness output"):
        read_harness(tmp_path / "empty")
    d = tmp_path / "nosamples" / "org__a"
    d.mkdir(parents=True)
    (d / f"results_{TS1}.json").write_text("{}")
    assert is_harness(tmp_path / "nosamples")  # lm-eval output without --log_samples: named, never vanishes
    with pytest.raises(DataError, match=r"org__a: an lm-eval results file but no samples.*without --log_samples"):
        read_harness(tmp_path / "nosamples")


def test_lm_eval_broken_results_json(lm_out):
    (lm_out / "org__model-b" / f"results_{TS2}.json").write_text("{not json")
    with pytest.raises(DataError, match=r"results_2024-06-01.*\.json: the results file is not valid JSON \(.*\), so "
                                        r"the run's model is unknown; pass --on-damaged skip"):
        read_lm_eval(lm_out)


# ---------------------------------------------------------------- HELM


def write_helm_run(suite, model, subject, instances, *, stat="exact_match"):
    """benchmark_output/runs/<suite>/<run name>/ with run_spec.json and per_instance_stats.json.

    ``instances``: list of (instance_id, train_trial_index, value); each instance also gets a
    perturbed copy (which must be ignored) and a num_prompt_tokens stat.
    """
    name = f"mmlu:subject={subject},method=multiple_choice_joint,model={model.replace('/', '_')}"
    d = Path(suite) / name
    d.mkdir(parents=True)
    spec = {
        "name": name,
        "scenario_spec": {"class_name": "helm.benchmark.scenarios.mmlu_scenario.MMLUScenario",
                          "args": {"subject": subject}},
        "adapter_spec": {"method": "multiple_choice_joint", "model_deployment": f"hf/{model}", "model": model,
                         "num_train_trials": 1, "max_train_instances": 5},
        "metric_specs": [{"class_name": "helm.benchmark.metrics.basic_metrics.BasicGenerationMetric",
                          "args": {"names": [stat]}}],
        "groups": ["mmlu"],
    }
    (d / "run_spec.json").write_text(json.dumps(spec, indent=2))
    typo = {"name": "misspellings", "robustness": True, "fairness": False, "computed_on": "perturbed", "prob": 0.1}

    def st(metric, value, pert=None):
        nm = {"name": metric, "split": "test", **({"perturbation": pert} if pert else {})}
        return {"name": nm, "count": 1, "sum": value, "sum_squared": value * value, "min": value, "max": value,
                "mean": value, "variance": 0.0, "stddev": 0.0}

    entries = []
    for iid, trial, value in instances:
        entries.append({"instance_id": iid, "train_trial_index": trial,
                        "stats": [st("num_prompt_tokens", 311.0), st(stat, value)]})
        entries.append({"instance_id": iid, "perturbation": typo, "train_trial_index": trial,
                        "stats": [st(stat, 1.0 - value, typo)]})
    (d / "per_instance_stats.json").write_text(json.dumps(entries, indent=2))
    for extra in ("scenario.json", "scenario_state.json", "stats.json"):
        (d / extra).write_text("{}")
    return d


@pytest.fixture
def helm_suite(tmp_path):
    suite = tmp_path / "benchmark_output" / "runs" / "v1"
    write_helm_run(suite, "openai/gpt2", "anatomy", [("id0", 0, 1.0), ("id1", 0, 0.0)])
    write_helm_run(suite, "meta/llama-7b", "anatomy", [("id1", 0, 1.0), ("id0", 0, 1.0)])
    write_helm_run(suite, "openai/gpt2", "virology", [("id0", 0, 0.0)])
    (suite / "eval_cache").mkdir()
    return suite


def test_helm_suite_folder(helm_suite):
    ds = read_harness(helm_suite)
    assert detect_format(helm_suite) == "helm" and ds.attrs["harness"] == "helm" and ds.attrs["stat"] == "exact_match"
    assert list(ds["model"].values) == ["meta/llama-7b", "openai/gpt2"]  # run folders in name order
    assert list(ds["item"].values) == ["mmlu:subject=anatomy,method=multiple_choice_joint/id1",
                                       "mmlu:subject=anatomy,method=multiple_choice_joint/id0",
                                       "mmlu:subject=virology,method=multiple_choice_joint/id0"]
    assert set(ds["item_group"].values) == {"mmlu"}
    assert cells(ds) == [[1, 0], [1, 1], [None, 0]]
    assert ds.attrs["helm_runs"] == 3


def test_helm_run_folders_trials_and_stat(tmp_path):
    a = write_helm_run(tmp_path, "m/a", "anatomy", [("id0", 0, 1.0), ("id0", 1, 0.0), ("id0", 2, 1.0),
                                                     ("id1", 0, 0.0)])
    b = write_helm_run(tmp_path, "m/b", "anatomy", [("id0", 0, 0.5), ("id1", 0, 1.0)], stat="f1_score")
    c = write_helm_run(tmp_path / "c", "m/c", "anatomy", [("id0", 0, 1.0), ("id1", 0, 1.0)])
    with pytest.warns(RuntimeWarning, match="1 HELM run"), pytest.raises(DataError, match=r"1 model\(s\)"):
        read_helm([a, b])  # b lacks exact_match: skipped, which leaves one model
    with pytest.raises(DataError, match=r"1 \(model, item\) pairs .*train_trial_index.*--aggregate"):
        read_helm([a, c])
    ds = read_helm([a, c], aggregate="majority")  # a/id0 trials 1, 0, 1 -> 1
    assert cells(ds) == [[1, 1], [0, 1]] and ds.attrs["repeated_pairs"] == 1
    assert cells(read_helm([a, c], aggregate="first")) == [[1, 1], [0, 1]]
    shuffled = write_helm_run(tmp_path / "e", "m/a", "anatomy", [("id0", 2, 0.0), ("id1", 0, 0.0), ("id0", 0, 1.0),
                                                                ("id0", 1, 0.0)])
    id0 = "mmlu:subject=anatomy,method=multiple_choice_joint/id0"
    assert read_helm([shuffled, c], aggregate="first")["responses"].sel(item=id0, model="m/a") == 1  # trial 0
    assert read_helm([shuffled, c], aggregate="last")["responses"].sel(item=id0, model="m/a") == 0  # trial 2
    d = write_helm_run(tmp_path / "d", "m/d", "anatomy", [("id0", 0, 0.25), ("id1", 0, 0.0)], stat="f1_score")
    with pytest.raises(DataError, match=r"partial credit, not 0/1 \(e\.g\. 0\.5 for model 'm/b'"):
        read_helm([b, d], stat="f1_score")
    assert cells(read_helm([b, d], stat="f1_score", binarize=0.5)) == [[1, 0], [1, 0]]
    with pytest.raises(DataError, match=r"pass stat= one of: exact_match, num_prompt_tokens"):
        read_helm(a, stat="bleu_4")
    with pytest.raises(DataError, match=r"stat= does not apply to lm-eval|metric= does not apply to helm"):
        read_harness(a, metric="acc")


def test_helm_malformed(helm_suite):
    run = next(p for p in sorted(helm_suite.iterdir()) if p.name.endswith("gpt2") and "anatomy" in p.name)
    (run / "per_instance_stats.json").write_text('[{"instance_id": "id0"}]')
    with pytest.raises(DataError, match=r"per_instance_stats\.json: entry 0 lacks instance_id or a stats list"):
        read_helm(helm_suite)
    (run / "per_instance_stats.json").write_text("[{")
    with pytest.raises(DataError, match=r"openai_gpt2: per_instance_stats\.json is not valid JSON \(.*\) "
                                        r"\(cut short\); pass --on-damaged skip"):
        read_helm(helm_suite)
    (run / "run_spec.json").write_text('{"name": "x", "adapter_spec": {}}')
    with pytest.raises(DataError, match=r"run_spec\.json has no adapter_spec\.model"):
        read_helm(helm_suite)


# ---------------------------------------------------------------- detection


def test_is_harness_rejects_ordinary_data(tmp_path, lm_out, helm_suite):
    nt = tmp_path / "nt"
    nt.mkdir()
    np.save(nt / "responses.npy", np.zeros((2, 2)))
    (nt / "models.csv").write_text("model_id\na\nb\n")
    (tmp_path / "wide.csv").write_text("item,a,b\nq1,1,0\n")
    (tmp_path / "other.json").write_text('{"version": "1", "name": "x"}')
    for p in (nt, tmp_path / "wide.csv", tmp_path / "other.json", tmp_path / "missing"):
        assert not is_harness(p)
    for p in (lm_out, lm_out / "org__model-a", helm_suite, sorted(helm_suite.glob("mmlu*"))[0]):
        assert is_harness(p)


# ---------------------------------------------------------------- Inspect AI


def write_inspect_log(path, model, task, scores, *, scorer="choice", epochs=1):
    """An Inspect log written by inspect_ai's own writer; ``scores``: {sample id: [value per epoch]}."""
    log_api = pytest.importorskip("inspect_ai.log")
    from inspect_ai.scorer import Score

    spec = log_api.EvalSpec(created="2024-05-13T12:34:56+00:00", task=task, dataset=log_api.EvalDataset(name=task),
                            model=model, config=log_api.EvalConfig(epochs=epochs))
    samples = [
        log_api.EvalSample(id=sid, epoch=e + 1, input="Q?", target="A",
                           scores=None if v is None else {scorer: Score(value=v), "other": Score(value=1)})
        for sid, values in scores.items() for e, v in enumerate(values)
    ]
    log_api.write_eval_log(log_api.EvalLog(eval=spec, samples=samples, status="success"), str(path))
    return Path(path)


def test_inspect_eval_and_json_logs(tmp_path):
    a = write_inspect_log(tmp_path / "logs" / "a.eval", "openai/gpt-4o", "gpqa", {1: ["C"], 2: ["I"], 3: [None]})
    b = write_inspect_log(tmp_path / "logs" / "b.json", "anthropic/claude", "gpqa", {2: ["C"], 1: ["N"], 3: [True]})
    assert detect_format(a) == detect_format(b) == detect_format(a.parent) == "inspect"
    ds = read_harness(a.parent)
    assert list(ds["model"].values) == ["openai/gpt-4o", "anthropic/claude"]
    assert list(ds["item"].values) == ["gpqa/1", "gpqa/2", "gpqa/3"]
    assert list(ds["item_group"].values) == ["gpqa"] * 3
    assert cells(ds) == [[1, 0], [0, 1], [None, 1]]
    assert ds.attrs["harness"] == "inspect" and ds.attrs["metric"] == "choice"
    assert ds.attrs["inspect_unscored_samples"] == 1
    assert cells(read_harness([b, a], metric="other")) == [[1, 1], [1, 1], [1, None]]


def test_inspect_epochs_partial_and_errors(tmp_path):
    a = write_inspect_log(tmp_path / "a.eval", "m/a", "t", {1: ["C", "I", "C"], 2: ["P", "I", "I"]}, epochs=3)
    b = write_inspect_log(tmp_path / "b.eval", "m/b", "t", {1: ["I", "I", "C"], 2: ["C", "C", "P"]}, epochs=3)
    with pytest.raises(DataError, match=r"partial credit.*--binarize"):
        read_harness([a, b])
    with pytest.raises(DataError, match=r"4 \(model, item\) pairs .*epochs > 1.*--aggregate"):
        read_harness([a, b], binarize=0.5)
    ds = read_harness([a, b], aggregate="mean", binarize=0.5)  # means: a 2/3, 1/6; b 1/3, 5/6
    assert cells(ds) == [[1, 0], [0, 1]] and ds.attrs["aggregate"] == "mean"
    assert cells(read_harness([a, b], aggregate="first", binarize=0.5)) == [[1, 0], [1, 1]]
    with pytest.raises(DataError, match=r"sample 1 \(epoch 1\) has no score from scorer 'match'"):
        read_harness([a, b], metric="match")
    broken = tmp_path / "broken.eval"
    broken.write_bytes(a.read_bytes()[:200])
    assert is_harness(broken)  # a damaged log is named, never passed over
    with pytest.raises(DataError, match=r"broken\.eval: the Inspect log is not a complete zip file \(cut short\?\)"):
        read_inspect([a, broken], aggregate="first", binarize=0.5)


def test_inspect_dict_value_refused(tmp_path):
    a = write_inspect_log(tmp_path / "a.json", "m/a", "t", {1: [{"x": 1}], 2: ["C"]})
    b = write_inspect_log(tmp_path / "b.json", "m/b", "t", {1: ["C"], 2: ["C"]})
    with pytest.raises(DataError, match=r"a\.json: sample 1 \(epoch 1\): scorer 'choice' gave .*not one correct"):
        read_harness([a, b])


def test_inspect_json_log_without_samples(tmp_path):
    """The reader needs no inspect_ai; a JSON log with nothing scored is refused by name."""
    log = tmp_path / "a.json"
    log.write_text('{"version": 2, "status": "success", "eval": {}}')
    with pytest.warns(RuntimeWarning, match=r"a\.json holds no samples"), pytest.raises(
            DataError, match=r"the Inspect logs read \(1\) hold no scored samples"):
        read_inspect(log)


# ---------------------------------------------------------------- every command reads harness output


def test_load_dispatches_harness_output(lm_out, helm_suite, tmp_path):
    from bayesirt.data import load

    assert load(lm_out).attrs["harness"] == "lm-eval"
    assert load(helm_suite).attrs["harness"] == "helm"
    assert load(lm_out, metric="acc_norm")["responses"].sel(item="arc_easy/0", model="org/model-a") == 0
    logs = tmp_path / "logs"
    logs.mkdir()
    write_inspect_log(logs / "a.eval", "openai/gpt-4o", "gpqa", {1: ["C"], 2: ["I"]})
    write_inspect_log(logs / "b.json", "anthropic/claude", "gpqa", {1: ["I"], 2: ["C"]})
    assert load(logs).attrs["harness"] == "inspect"


def _many_models_lm_eval(out, n_models=12, n_docs=10, seed=0):
    """An lm-eval output folder of ``n_models`` models x ``n_docs`` docs of two tasks (Rasch-like data)."""
    rng = np.random.default_rng(seed)
    ability = rng.normal(size=n_models)
    for m in range(n_models):
        tasks = {}
        for task in ("arc_easy", "hellaswag"):
            p = 1 / (1 + np.exp(-(ability[m] + rng.normal(size=n_docs))))
            tasks[task] = [lm_record(task, d, acc=float(rng.random() < p[d])) for d in range(n_docs)]
        write_lm_run(out, f"org{m}__model-{m}", tasks)
    return out


@pytest.mark.slow
def test_cli_fits_and_scores_lm_eval_output(tmp_path, capsys):
    from bayesirt.cli.main import main

    data = _many_models_lm_eval(tmp_path / "lm")
    assert main(["mml", str(data), "--out", str(tmp_path / "mml"), "--no-progress"]) == 0
    summary = json.loads((tmp_path / "mml" / "summary.json").read_text())
    assert summary["n_models"] == 12
    items = (tmp_path / "mml" / "items.csv").read_text()
    assert "arc_easy/0" in items and "hellaswag/9" in items
    assert "lm-eval" in summary["reading"]["harness"]
    assert "bayesirt: read lm-eval" in capsys.readouterr().err  # the one summary line of what was found
    saved = json.loads(xr.open_datatree(tmp_path / "mml" / "mml.nc").attrs["bayesirt_reading"])
    assert saved == summary["reading"]  # the reading record travels with the estimates
    assert main(["fit", str(data), "--method", "advi", "--draws", "50", "--out", str(tmp_path / "fit"),
                 "--no-progress"]) == 0
    fitted = json.loads((tmp_path / "fit" / "summary.json").read_text())
    assert fitted["reading"] == summary["reading"]
    tree = xr.open_datatree(tmp_path / "fit" / "posterior.nc")
    assert json.loads(tree.attrs["bayesirt_reading"]) == summary["reading"]


def test_cli_reading_options_reach_the_reader(tmp_path, capsys):
    from bayesirt.cli.main import main

    data = _many_models_lm_eval(tmp_path / "lm")
    # the same docs again under a second filter: repeats that need --filter
    for m in range(12):
        folder = data / f"org{m}__model-{m}"
        extra = [lm_record("arc_easy", d, filt="flexible-extract", acc=1.0) for d in range(10)]
        with open(next(folder.glob("samples_arc_easy_*.jsonl")), "a") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in extra)
    assert main(["mml", str(data), "--out", str(tmp_path / "refused"), "--no-progress"]) == 2
    assert "filter" in capsys.readouterr().err
    assert main(["mml", str(data), "--filter", "none", "--out", str(tmp_path / "ok"), "--no-progress"]) == 0


def test_empty_models_are_dropped_and_listed_unless_refused(tmp_path, capsys):
    from bayesirt.cli.main import main
    from bayesirt.data import load, read_wide_csv
    from bayesirt.data.io import DeprecatedSpellingWarning
    from bayesirt.data.reading import DroppedWarning

    rng = np.random.default_rng(1)
    table = "model," + ",".join(f"q{i}" for i in range(8)) + "\n"
    for m in range(10):
        table += f"org/m{m}," + ",".join(str(int(v)) for v in rng.random(8) < 0.6) + "\n"
    table += "org/silent," + "," * 7 + "\n"  # a leaderboard row with no responses
    path = tmp_path / "board.csv"
    path.write_text(table)
    ds = load(path)
    assert "org/silent" not in ds["model"].values
    assert json.loads(ds.attrs["dropped_models"]) == ["org/silent"] and ds.attrs["n_dropped_models"] == 1
    with pytest.raises(DataError, match="'org/silent' has no observed responses"):
        load(path, drop_empty=False)
    assert main(["mml", str(path), "--out", str(tmp_path / "mml"), "--no-progress"]) == 0
    # one default everywhere: the reader behind load() drops (and names) what load() drops
    with pytest.warns(DroppedWarning, match=r"board\.csv: dropped 1 model\(s\) without any observed response "
                                            r"\(org/silent\)"):
        assert read_wide_csv(path)["model"].values.tolist() == ds["model"].values.tolist()
    assert main(["mml", str(path), "--refuse-empty", "--out", str(tmp_path / "refused"), "--no-progress"]) == 2
    assert "'org/silent' has no observed responses" in capsys.readouterr().err
    # the old spelling, which never kept anything, refuses too, with a warning naming the new one
    with pytest.warns(DeprecatedSpellingWarning, match=r"--keep-empty .* is deprecated: it never kept .*say "
                                                       r"--refuse-empty"):
        assert main(["mml", str(path), "--keep-empty", "--out", str(tmp_path / "kept"), "--no-progress"]) == 2
    assert "'org/silent' has no observed responses" in capsys.readouterr().err
    assert not (tmp_path / "refused").exists() and not (tmp_path / "kept").exists()
