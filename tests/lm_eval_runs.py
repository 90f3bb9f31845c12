"""lm-evaluation-harness output folders for tests: what ``lm_eval --log_samples --output_path OUT`` writes
for one model and one task (the layout read by :mod:`bayesirt.data.harness.lm_eval`), with given answers."""

from __future__ import annotations

import json
from pathlib import Path

DATE_ID = "2024-05-13T12-34-56.789012"


def _record(doc_id, correct) -> dict:
    return {"doc_id": doc_id, "doc": {"q": str(doc_id)}, "target": "0", "arguments": {}, "resps": [], "filtered_resps": [],
            "filter": "none", "metrics": ["acc"], "doc_hash": "a" * 64, "prompt_hash": "b" * 64,
            "target_hash": "c" * 64, "acc": float(correct)}


def write_lm_eval_run(out: Path, model: str, task: str, docs, answers) -> Path:
    """``OUT/<model, / as __>/results_<date>.json`` and ``samples_<task>_<date>.jsonl``: document
    ``docs[k]`` scored ``answers[k]`` (1 correct, 0 incorrect)."""
    folder = Path(out) / model.replace("/", "__")
    folder.mkdir(parents=True)
    (folder / f"results_{DATE_ID}.json").write_text(json.dumps({"results": {task: {}}, "model_name": model}))
    with open(folder / f"samples_{task}_{DATE_ID}.jsonl", "w") as fh:
        fh.writelines(json.dumps(_record(d, c)) + "\n" for d, c in zip(docs, answers, strict=True))
    return folder
