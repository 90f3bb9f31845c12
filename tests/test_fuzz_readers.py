"""Fuzzing the readers (issue 21, item 5): random bytes and malformed-but-plausible files give a valid
response Dataset (or spec) or a one-line error of the package's own types, never another exception.

Every reader is covered: wide and long CSV/TSV/TXT, Parquet, NPZ, the NPY+CSV folder, NetCDF, the
evaluation-harness formats (lm-eval ``--log_samples`` folders, HELM runs, Inspect AI logs), model specs
(:func:`bayesirt.models.load_spec`) and analysis files (:func:`bayesirt.jobs.analysis.load_analysis`).

Two parts:

- Hypothesis properties, per reader: random bytes under the reader's file name, valid files with
  random byte mutations (flips, cuts, inserts), and files generated from strategies that are
  plausible but wrong (random cells, ragged rows, renamed or duplicated columns, wrong dtypes and
  shapes, truncated or non-object JSON lines, metric values of every JSON type, TOML with keys and
  values of the wrong types). Derandomized and without an example database, so CI runs the same
  examples every time.
- ``CORPUS``: hand-written malformed files, each with the fragment its one-line message must hold.
  It includes a regression case for every crash the fuzzing found. Grow it with each new format.
"""

from __future__ import annotations

import importlib.util
import io
import json
import math
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xarray as xr
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from bayesirt.jobs.analysis import load_analysis
from bayesirt.data import load, make_responses, read_long, save_responses, validate_responses
from bayesirt.errors import BayesIRTError, DataError, SpecError
from bayesirt.models.specs import BUILTIN_DIR, IRTSpec, MIRTSpec, load_spec

# h5netcdf's File.__del__ on a corrupt HDF5 file it failed to open prints an ignored AttributeError
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

HAVE_INSPECT = importlib.util.find_spec("inspect_ai") is not None
ROOT = Path(__file__).resolve().parent.parent
TS1, TS2 = "2024-05-13T12-34-56.789012", "2024-06-01T08-00-00.000001"

# BAYESIRT_FUZZ_EXAMPLES=N runs N random (not derandomized) examples per property: a deeper search than CI's.
DEEP = int(os.environ.get("BAYESIRT_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=DEEP or 60,
    deadline=None,
    derandomize=not DEEP,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
                           HealthCheck.filter_too_much],
)
FEW = settings(FUZZ, max_examples=DEEP or 30)


# ------------------------------------------------------------------------------------------- the property


def check_message(exc: BaseException, kind: type[BayesIRTError]) -> None:
    """A package error of the expected kind with a non-empty, one-line message."""
    assert isinstance(exc, kind), f"{type(exc).__name__} is not a {kind.__name__}: {exc}"
    msg = str(exc)
    assert msg.strip(), f"{type(exc).__name__} with an empty message"
    assert "\n" not in msg and "\r" not in msg, f"message on several lines: {msg!r}"


def refused_or_valid(call: Callable[[], Any], kind: type[BayesIRTError] = DataError) -> Any:
    """Run a reader: its result, or None when it refused the input with a one-line ``kind`` error.

    Any other exception propagates and fails the test.
    """
    try:
        result = call()
    except BayesIRTError as exc:
        check_message(exc, kind)
        return None
    return result


def check_data(call: Callable[[], Any]) -> xr.Dataset | None:
    """The data-reader property: a valid response Dataset or a one-line DataError."""
    out = refused_or_valid(call, DataError)
    if out is not None:
        assert isinstance(out, xr.Dataset)
        validate_responses(out)  # must not raise: the Dataset is a valid response Dataset
    event("read: a valid Dataset" if out is not None else "refused with a DataError")
    return out


def check_spec(path: Path) -> None:
    out = refused_or_valid(lambda: load_spec(path), SpecError)
    assert out is None or isinstance(out, (IRTSpec, MIRTSpec))


def check_analysis(path: Path) -> None:
    out = refused_or_valid(lambda: load_analysis(path), SpecError)
    assert out is None or isinstance(out, dict)


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_bytes(data.encode("utf-8"))
    else:
        path.write_bytes(data)
    return path


# ------------------------------------------------------------------------------------------- strategies

#: cell values of CSV tables: valid codes, NA spellings, wrong numbers, words, any unicode, very long strings
CELL = st.one_of(
    st.sampled_from(["0", "1"]),
    st.sampled_from(["", "NA", "na", "NaN", "null", "None", "n/a", "2", "-1", "0.5", "1.0", "0.0", "yes", "True",
                     "false", " 1", "1 ", "1e0", "inf", "-0", "+1", '"1"', "'0'", "0x1"]),
    st.text(max_size=6),
    st.just("x" * 5000),
)
#: column headers and ids: id-column names, model-like names, blanks, duplicates, any unicode
HEADER = st.one_of(
    st.sampled_from(["", "model", "item", "Model", "question", "respondent", "Q1", "Q2", "gpt-4o",
                     "meta-llama/Llama-3-8B", "Qwen/Qwen2-7B", "Unnamed: 0", "model_id", "correct", " "]),
    st.text(max_size=6),
)
ID = st.one_of(st.sampled_from(["a", "b", "org/c", "q1", "q2", "q3", "", " ", "NA", "1", "a/b"]), st.text(max_size=4))

#: any JSON value (NaN and infinities included: Python's json reads and writes them)
JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.integers(), st.floats(),
                        st.text(max_size=5))
JSON_VALUE = st.recursive(JSON_SCALAR, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c,
                                                                                              max_size=3), max_leaves=6)
#: numbers beyond float range, as JSON writes them (exact big integers)
HUGE_INT = st.integers(min_value=10**308, max_value=10**330) | st.integers(min_value=-(10**330), max_value=-(10**308))


def dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


@st.composite
def mutated(draw: st.DrawFn, original: bytes) -> bytes:
    """``original`` with 1-4 random edits: overwrite, cut the tail, insert, delete."""
    data = bytearray(original)
    edits = draw(st.lists(st.tuples(st.sampled_from(["overwrite", "cut", "insert", "delete"]),
                                    st.integers(0, max(len(data), 1)), st.binary(min_size=1, max_size=8)),
                          min_size=1, max_size=4))
    for op, pos, chunk in edits:
        pos = min(pos, len(data))
        if op == "overwrite":
            data[pos:pos + len(chunk)] = chunk
        elif op == "cut":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = chunk
        else:
            del data[pos:pos + len(chunk)]
    return bytes(data)


@st.composite
def wide_table(draw: st.DrawFn) -> tuple[str, str]:
    """(suffix, text) of a wide table: random headers and cells, maybe ragged, any separator, BOM, CRLF."""
    suffix = draw(st.sampled_from([".csv", ".tsv", ".txt"]))
    sep = draw(st.sampled_from([",", ";", "\t", {".csv": ",", ".tsv": "\t", ".txt": ","}[suffix]]))
    header = draw(st.lists(HEADER, min_size=1, max_size=5))
    n = len(header)
    if draw(st.booleans()):
        rows = draw(st.lists(st.lists(CELL, min_size=n, max_size=n), max_size=5))
    else:  # ragged rows
        rows = draw(st.lists(st.lists(CELL, min_size=max(0, n - 2), max_size=n + 2), max_size=5))
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    text = eol.join(sep.join(r) for r in [header, *rows]) + draw(st.sampled_from(["", eol, eol * 2]))
    return suffix, ("\ufeff" if draw(st.booleans()) else "") + text


LONG_COLUMNS = ["model", "item", "correct", "item_group", "family", "owner", "Model", "llm", "y"]
LONG_CELLS = {
    "model": st.sampled_from(["a", "b", "org/c", "", " "]) | ID,
    "item": st.sampled_from(["q1", "q2", "q3", ""]) | ID,
    "correct": st.sampled_from(["0", "1", "true", "False", ""]) | CELL,
    "item_group": st.sampled_from(["g1", "g2", ""]) | ID,
    "family": st.sampled_from(["Llama", "Qwen", ""]) | ID,
    "owner": st.sampled_from(["o1", "o2", ""]) | ID,
}


@st.composite
def long_columns(draw: st.DrawFn) -> list[str]:
    """The three long columns in any order, sometimes one missing, plus extra/renamed/duplicated ones."""
    base = [c for c in draw(st.permutations(["model", "item", "correct"])) if draw(st.integers(0, 7)) > 0]
    return base + draw(st.lists(st.sampled_from(LONG_COLUMNS) | HEADER, max_size=3))


@st.composite
def long_table(draw: st.DrawFn) -> tuple[str, str, dict[str, str]]:
    """(suffix, text, options) of a long table; options sometimes rename the columns to read."""
    suffix = draw(st.sampled_from([".csv", ".tsv", ".txt"]))
    sep = {".csv": ",", ".tsv": "\t", ".txt": draw(st.sampled_from([",", "\t", ";"]))}[suffix]
    header = draw(long_columns())
    rows = [[draw(LONG_CELLS.get(c, CELL)) for c in header] for _ in range(draw(st.integers(0, 8)))]
    if rows and draw(st.booleans()):
        rows[-1] = rows[-1][: draw(st.integers(0, len(header)))]  # a short last row
    text = "\n".join(sep.join(r) for r in [header, *rows]) + "\n"
    options = draw(st.dictionaries(st.sampled_from(["model", "item", "correct"]), st.sampled_from(LONG_COLUMNS),
                                   max_size=2))
    return suffix, text, options


def _arrow_column(n: int) -> st.SearchStrategy[pa.Array]:
    """One Parquet column of ``n`` values of a random Arrow type (nulls included)."""
    def typed(values: st.SearchStrategy, arrow_type: pa.DataType) -> st.SearchStrategy[pa.Array]:
        return st.lists(st.none() | values, min_size=n, max_size=n).map(lambda v: pa.array(v, arrow_type))

    return st.one_of(
        typed(st.sampled_from(["0", "1", "true", "a", "b", "q1", "q2", "", " "]) | st.text(max_size=4), pa.string()),
        typed(st.integers(-2, 3) | st.integers(-(2**63), 2**63 - 1), pa.int64()),
        typed(st.sampled_from([0.0, 1.0, 0.5]) | st.floats(), pa.float64()),
        typed(st.booleans(), pa.bool_()),
        typed(st.lists(st.integers(0, 1), max_size=2), pa.list_(pa.int64())),
        typed(st.binary(max_size=4), pa.binary()),
        typed(st.integers(0, 2**40), pa.timestamp("s")),
        typed(st.fixed_dictionaries({"a": st.integers(0, 1)}), pa.struct([("a", pa.int64())])),
        typed(st.sampled_from(["a", "b", "0", "1"]), pa.string()).map(lambda a: a.dictionary_encode()),
        st.just(pa.nulls(n)),
    )


@st.composite
def parquet_bytes(draw: st.DrawFn) -> bytes:
    """A Parquet file with long-ish columns (maybe missing, renamed, duplicated) of random Arrow types."""
    names = draw(long_columns())
    n = draw(st.integers(0, 6))
    columns = []
    for name in names:
        if name in ("model", "item") and draw(st.booleans()):
            columns.append(pa.array(draw(st.lists(LONG_CELLS[name], min_size=n, max_size=n)), pa.string()))
        elif name == "correct" and draw(st.booleans()):
            columns.append(pa.array(draw(st.lists(st.sampled_from([0.0, 1.0, None]), min_size=n, max_size=n)),
                                    pa.float64()))
        else:
            columns.append(draw(_arrow_column(n)))
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_arrays(columns, names=names), sink)
    return sink.getvalue()


NP_DTYPES = [np.int8, np.int64, np.uint8, np.float64, np.float16, np.bool_, np.complex128, "U4", "S4",
             "datetime64[s]", np.dtype([("a", "i4"), ("b", "f8")])]
ANY_ARRAY = arrays(st.sampled_from(NP_DTYPES), array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
OBJECT_ARRAY = arrays(object, array_shapes(min_dims=1, max_dims=2, max_side=3),
                      elements=st.none() | st.integers(0, 1) | st.text(max_size=3))


@st.composite
def id_array(draw: st.DrawFn, n: int) -> np.ndarray:
    """``n`` ids (sometimes one too few or too many) as unicode, bytes (maybe not UTF-8) or float."""
    n = max(0, n + draw(st.sampled_from([0, 0, 0, -1, 1])))
    kind = draw(st.sampled_from(["U", "U", "S", "f"]))
    if kind == "U":
        return np.array(draw(st.lists(ID, min_size=n, max_size=n)), dtype=str)
    if kind == "S":
        return np.array(draw(st.lists(st.binary(max_size=3), min_size=n, max_size=n)), dtype="S3")
    return np.array(draw(st.lists(st.floats(), min_size=n, max_size=n)), dtype=float)


@st.composite
def responses_array(draw: st.DrawFn, n_items: int, n_models: int) -> np.ndarray:
    kind = draw(st.sampled_from(["int8", "int64", "float64", "bool", "U3"]))
    elements = {
        "int8": st.sampled_from([0, 1, -1, 2]),
        "int64": st.sampled_from([0, 1, -1, 2]),
        "float64": st.sampled_from([0.0, 1.0, -1.0, np.nan, 0.5, np.inf]),
        "bool": st.booleans(),
        "U3": st.sampled_from(["0", "1", "", "nan", "x"]),
    }[kind]
    return draw(arrays(kind, (n_items, n_models), elements=elements))


@st.composite
def nt_arrays(draw: st.DrawFn) -> dict[str, np.ndarray]:
    """The arrays of an NT NPZ: plausible shapes and ids, with keys dropped or replaced by anything."""
    n_items, n_models = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    out = {"responses": draw(responses_array(n_items, n_models)), "model_id": draw(id_array(n_models))}
    for key, n in (("item_id", n_items), ("item_group", n_items), ("family", n_models), ("owner", n_models)):
        if draw(st.booleans()):
            out[key] = draw(id_array(n))
    for key in draw(st.lists(st.sampled_from([*out, "extra"]), max_size=2)):
        out[key] = draw(ANY_ARRAY | OBJECT_ARRAY)  # wrong dtype or shape, or a pickled object array
    for key in draw(st.lists(st.sampled_from(sorted(out)), max_size=1)):
        out.pop(key, None)
    return out


def npz_bytes(arrays_: dict[str, np.ndarray], compressed: bool) -> bytes:
    sink = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(sink, **arrays_)
    return sink.getvalue()


def npy_bytes(arr: np.ndarray) -> bytes:
    sink = io.BytesIO()
    np.save(sink, arr)
    return sink.getvalue()


@st.composite
def id_csv(draw: st.DrawFn, id_col: str, extra: tuple[str, ...], n: int) -> str:
    """models.csv / items.csv: id column present or not, extra columns, about ``n`` rows of any ids."""
    header = draw(st.lists(st.sampled_from([id_col, *extra, "x", ""]) | HEADER, min_size=1, max_size=3))
    if draw(st.booleans()) and id_col not in header:
        header.insert(0, id_col)
    rows = draw(st.lists(st.lists(ID, min_size=len(header), max_size=len(header)), min_size=max(0, n - 1),
                         max_size=n + 1))
    return "\n".join(",".join(r) for r in [header, *rows]) + "\n"


# -- lm-eval
METRICS = ["acc", "acc_norm", "exact_match"]
#: names with line breaks and control characters: they must not break a message onto several lines
ODD_NAMES = ["two\nlines", "cr\rname", "tab\tname", "nul\x00", "sep\u2028name"]
METRIC_VALUE = st.one_of(st.sampled_from([0, 1, 0.0, 1.0, True, False, 0.5, "1", None, [1], {}, float("nan")]),
                         JSON_VALUE, HUGE_INT)


@st.composite
def lm_record(draw: st.DrawFn) -> dict[str, Any]:
    """A samples record with fields dropped or of the wrong type."""
    rec: dict[str, Any] = {}
    if draw(st.integers(0, 5)) > 0:
        rec["doc_id"] = draw(st.integers(0, 3) | st.sampled_from(["0", "1", "a/b"]) | JSON_VALUE)
    if draw(st.integers(0, 5)) > 0:
        rec["metrics"] = draw(st.lists(st.sampled_from(METRICS + ODD_NAMES), min_size=1, max_size=2, unique=True)
                               | JSON_VALUE)
    for name in METRICS:
        if draw(st.booleans()):
            rec[name] = draw(st.sampled_from([0, 1, 0.0, 1.0]) | METRIC_VALUE)
    if draw(st.booleans()):
        rec["filter"] = draw(st.sampled_from(["none", "strict-match", "flexible-extract", *ODD_NAMES]) | JSON_VALUE)
    return rec


#: lines of a samples JSONL file: records, truncated records, non-objects, blanks, bytes that are not UTF-8
JSONL_LINE = st.one_of(
    lm_record().map(dumps),
    lm_record().map(dumps),
    st.tuples(lm_record().map(dumps), st.integers(0, 60)).map(lambda t: t[0][: t[1]]),
    JSON_VALUE.map(dumps),
    st.sampled_from(["", " ", "{", "}", "[", "null", "{}", '{"doc_id": 1}', "\x00", "\ufeff{}"]),
).map(lambda s: s.encode("utf-8")) | st.binary(max_size=12)


@st.composite
def lm_results(draw: st.DrawFn) -> bytes | None:
    """A results JSON: absent, garbage, not an object, or an object with odd model_name/config."""
    choice = draw(st.integers(0, 4))
    if choice == 0:
        return None
    if choice == 1:
        return draw(st.binary(max_size=20))
    if choice == 2:
        return dumps(draw(JSON_VALUE)).encode()
    args = st.sampled_from(["pretrained=org/x,dtype=float16", "pretrained=", "a,b=c,=", ""]) | JSON_VALUE
    body = {"model_name": draw(st.sampled_from(["org/x", "org/y", "", " ", *ODD_NAMES]) | JSON_VALUE),
            "config": draw(st.fixed_dictionaries({"model_args": args}) | JSON_VALUE)}
    return dumps({k: v for k, v in body.items() if draw(st.booleans())}).encode()


@st.composite
def lm_folder(draw: st.DrawFn) -> dict[str, bytes | None]:
    """Relative path -> bytes of an lm-eval output folder with two model folders."""
    files: dict[str, bytes | None] = {}
    for model in draw(st.sampled_from([("org__a", "org__b"), ("a", "b"), ("org__a",)])):
        ts = draw(st.sampled_from([TS1, TS2]))
        files[f"{model}/results_{ts}.json"] = draw(lm_results())
        for task in draw(st.lists(st.sampled_from(["arc_easy", "gsm8k", "x_y"]), min_size=1, max_size=2,
                                  unique=True)):
            lines = draw(st.lists(JSONL_LINE, min_size=0, max_size=5))
            files[f"{model}/samples_{task}_{ts}.jsonl"] = b"\n".join(lines) + b"\n"
    return files


HARNESS_OPTIONS = st.fixed_dictionaries({}, optional={
    "aggregate": st.sampled_from(["first", "majority", "mean", "median"]),
    "binarize": st.sampled_from([0.5, 1, float("nan"), "0.5", True]),
})
LM_OPTIONS = st.tuples(HARNESS_OPTIONS, st.fixed_dictionaries({}, optional={
    "metric": st.sampled_from(METRICS + ["f1"]), "filter": st.sampled_from(["none", "strict-match", "x"])}),
).map(lambda t: {**t[0], **t[1]})


# -- HELM
@st.composite
def helm_stat(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 5)) == 0:
        return draw(JSON_VALUE)
    name: Any = {"name": draw(st.sampled_from(["exact_match", "f1_score", *ODD_NAMES]) | JSON_VALUE),
                 "split": "test"}
    if draw(st.integers(0, 3)) == 0:
        name["perturbation"] = draw(JSON_VALUE)
    if draw(st.integers(0, 5)) == 0:
        name = draw(JSON_VALUE)
    number = st.sampled_from([0, 1, 0.0, 1.0, 0.5, 2, None, "1", True]) | JSON_VALUE | HUGE_INT
    stat = {"name": name}
    for key in ("mean", "sum", "count"):
        if draw(st.booleans()):
            stat[key] = draw(number)
    return stat


@st.composite
def helm_entry(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 6)) == 0:
        return draw(JSON_VALUE)
    entry: dict[str, Any] = {"train_trial_index": draw(st.sampled_from([0, 0, 1]) | JSON_VALUE)}
    if draw(st.integers(0, 6)) > 0:
        entry["instance_id"] = draw(st.sampled_from(["id0", "id1", "id2"]) | JSON_VALUE)
    if draw(st.integers(0, 6)) > 0:
        entry["stats"] = draw(st.lists(helm_stat(), max_size=3) | JSON_VALUE)
    if draw(st.integers(0, 4)) == 0:
        entry["perturbation"] = draw(JSON_VALUE)
    return entry


@st.composite
def helm_run(draw: st.DrawFn, model: str) -> dict[str, bytes]:
    spec: Any = {"name": draw(st.sampled_from([f"mmlu:subject=a,model={model}", ":x", "", "mmlu"]) | JSON_VALUE),
                 "adapter_spec": draw(st.fixed_dictionaries({"model": st.sampled_from([model, *ODD_NAMES])
                                                                       | JSON_VALUE}) | JSON_VALUE)}
    if draw(st.booleans()):
        spec["scenario_spec"] = draw(st.fixed_dictionaries({"class_name": JSON_VALUE}) | JSON_VALUE)
    stats: Any = draw(st.lists(helm_entry(), max_size=4))
    run_spec, per_instance = dumps(spec).encode(), dumps(stats).encode()
    choice = draw(st.integers(0, 5))
    if choice == 0:
        run_spec = draw(st.binary(max_size=20) | JSON_VALUE.map(lambda v: dumps(v).encode()))
    elif choice == 1:
        per_instance = draw(st.binary(max_size=20) | JSON_VALUE.map(lambda v: dumps(v).encode()))
    return {"run_spec.json": run_spec, "per_instance_stats.json": per_instance}


# -- TOML
class Raw(str):
    """A TOML literal written as is (dates, times, bare words)."""


def toml_key(key: str) -> str:
    return json.dumps(key, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_value(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return toml_key(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_document(doc: dict[str, Any]) -> str:
    """Top-level scalars first, then one [table] per dict value (nested dicts inline)."""
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for key, table in doc.items():
        if isinstance(table, dict):
            lines.append(f"[{toml_key(key)}]")
            lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


TOML_SCALAR = st.one_of(st.booleans(), st.integers(-3, 3), st.integers(-(2**63), 2**63 - 1), st.floats(),
                        st.text(max_size=5),
                        st.sampled_from([Raw("1979-05-27"), Raw("07:32:00"), Raw("1979-05-27T07:32:00Z")]))
TOML_VALUE = st.recursive(TOML_SCALAR, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c,
                                                                                              max_size=2), max_leaves=5)
#: a TOML line that may be anything: a key/value, a table header, or broken syntax
TOML_LINE = st.one_of(
    st.tuples(st.sampled_from(["name", "kind", "mu", "sigma", "distribution", "structure", "data"])
              | st.text(max_size=4), TOML_VALUE).map(lambda kv: f"{toml_key(kv[0])} = {toml_value(kv[1])}"),
    st.sampled_from(["[priors]", "[priors.theta]", "[analysis]", "[fit]", "[[priors]]", "[priors", "x =", "= 1",
                     'a = "unterminated', "a = 1\na = 2", "\x00", "\ufeff", "a.b = 1", "[a]\n[a]"]),
    st.text(max_size=10),
)

NUMBER = st.sampled_from([0, 1, 0.5, -1, 2.0, float("nan"), float("inf")]) | TOML_VALUE
DISTRIBUTION = st.sampled_from(["normal", "lognormal", "halfnormal", "beta", "lkj", "gamma"]) | TOML_VALUE
PRIOR_TABLE = st.dictionaries(
    st.sampled_from(["distribution", "mu", "sigma", "alpha", "beta", "eta", "structure", "value", "scale"]),
    st.one_of(DISTRIBUTION, NUMBER, st.sampled_from(["item", "common", "fixed", "shared"])), max_size=5,
) | TOML_VALUE


@st.composite
def spec_document(draw: st.DrawFn) -> str:
    """A model spec with random top-level keys and [priors.*] tables of random keys and values."""
    doc: dict[str, Any] = draw(st.dictionaries(
        st.sampled_from(["name", "title", "link", "parameterization", "description", "kind", "structure",
                         "dimensions", "item_map", "extra"]),
        st.sampled_from(["logit", "probit", "difficulty", "slope-intercept", "mirt", "logistic", "exploratory",
                         "confirmatory", "item_group", 2, 0]) | TOML_VALUE, max_size=5))
    if draw(st.integers(0, 6)) > 0:
        priors = draw(st.dictionaries(st.sampled_from(["theta", "discrimination", "intercept", "difficulty",
                                                       "guessing", "slip", "loading", "factor_correlation",
                                                       "ability"]), PRIOR_TABLE, max_size=5))
        doc["priors"] = priors if draw(st.integers(0, 6)) > 0 else draw(TOML_VALUE)
    return toml_document(doc)


ANALYSIS_OPTIONS = {
    "fit": ["method", "draws", "tune", "chains", "seed", "ci", "float32", "advi_tolerance", "log_likelihood"],
    "audit": ["owner_cap", "alpha", "families", "quick", "bayes_method", "workers"],
    "safety": ["steps", "information", "cat"],
    "simulate": ["n_owners", "families", "dif_fraction", "seed"],
}


@st.composite
def analysis_document(draw: st.DrawFn) -> str:
    """An analysis file: an [analysis] table and option tables with random keys, values and types."""
    head = draw(st.dictionaries(st.sampled_from(["kind", "data", "model", "out", "extra"]),
                                st.sampled_from(["fit", "audit", "safety", "cat", "lsat6", "2pl", "out", "",
                                                 "simulate_dif_benchmark"]) | st.lists(st.sampled_from(["lsat6", ""]),
                                                                                        max_size=2) | TOML_VALUE,
                                max_size=5))
    doc: dict[str, Any] = {"analysis": head if draw(st.integers(0, 6)) > 0 else draw(TOML_VALUE)}
    for table in draw(st.lists(st.sampled_from([*ANALYSIS_OPTIONS, "other"]), max_size=2, unique=True)):
        keys = ANALYSIS_OPTIONS.get(table, ["x"])
        doc[table] = draw(st.dictionaries(st.sampled_from(keys) | st.text(max_size=3),
                                          st.sampled_from([1, 0.5, True, "nuts", [1], ["lsat6"]]) | TOML_VALUE,
                                          max_size=3) | TOML_VALUE)
    return toml_document(doc)


# ------------------------------------------------------------------------------------------- valid originals

MATRIX = np.array([[1, 0, np.nan, 1], [0, 1, 1, 1], [1, np.nan, 0, 0]])
ITEMS = ["q1", "q2", "q3"]
MODELS = ["meta-llama/Llama-3-8B", "Qwen/Qwen2-7B", "GPT-4o", "microsoft/phi-2"]


def _long_frame() -> pd.DataFrame:
    rows = [(m, i, MATRIX[k, j], f"g{k % 2}") for j, m in enumerate(MODELS) for k, i in enumerate(ITEMS)]
    return pd.DataFrame(rows, columns=["model", "item", "correct", "item_group"])


def _valid_parquet() -> bytes:
    sink = io.BytesIO()
    _long_frame().to_parquet(sink)
    return sink.getvalue()


def _valid_npz(compressed: bool) -> bytes:
    y = np.where(np.isnan(MATRIX), -1, MATRIX).astype(np.int8)
    return npz_bytes({"responses": y, "model_id": np.array(MODELS), "item_id": np.array(ITEMS)}, compressed)


def _valid_nc() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = save_responses(make_responses(MATRIX, item_id=ITEMS, model_id=MODELS, name="toy"), Path(tmp) / "x.nc")
        return path.read_bytes()


VALID = {
    ".parquet": _valid_parquet(),
    ".npz": _valid_npz(False),
    ".npz-compressed": _valid_npz(True),
    ".nc": _valid_nc(),
    ".csv": ",".join(["", *MODELS]).encode() + b"\nq1,1,0,,1\nq2,0,1,1,1\nq3,1.0,,0.0,0\n",
    ".csv-long": _long_frame().to_csv(index=False).encode(),
}


def _lm_valid_lines(model: str) -> bytes:
    rows = [{"doc_id": d, "filter": "none", "metrics": ["acc"], "acc": float((d + len(model)) % 2)} for d in range(3)]
    return b"".join(dumps(r).encode() + b"\n" for r in rows)


def _helm_valid(model: str) -> dict[str, bytes]:
    spec = {"name": f"mmlu:subject=a,model={model}", "adapter_spec": {"model": model}}
    stats = [{"instance_id": f"id{i}", "train_trial_index": 0,
              "stats": [{"name": {"name": "exact_match", "split": "test"}, "count": 1, "sum": v, "mean": v}]}
             for i, v in enumerate([1.0, 0.0, float(model == "m/a")])]
    return {"run_spec.json": dumps(spec).encode(), "per_instance_stats.json": dumps(stats).encode()}


# ------------------------------------------------------------------------------------------- random bytes

BYTES = st.binary(max_size=400)
TEXT_BYTES = st.text(max_size=200).map(lambda s: s.encode("utf-8"))
MAGIC = {".parquet": b"PAR1", ".pq": b"PAR1", ".npz": b"PK\x03\x04", ".nc": b"\x89HDF\r\n\x1a\n"}


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".txt", ".parquet", ".pq", ".npz", ".nc"])
@FEW
@given(data=st.one_of(BYTES, TEXT_BYTES), magic=st.booleans())
def test_random_bytes_data_file(suffix, data, magic):
    """Random bytes (or random text) under a data file's name, with the format's magic bytes or without."""
    if magic and suffix in MAGIC:
        data = MAGIC[suffix] + data + (MAGIC[suffix] if suffix in (".parquet", ".pq") else b"")
    with tempfile.TemporaryDirectory() as tmp:
        f = write(Path(tmp) / f"x{suffix}", data)
        check_data(lambda: load(f))


@pytest.mark.parametrize("original", sorted(VALID))
@FUZZ
@given(data=st.data())
def test_mutated_valid_data_file(original, data):
    """A valid file of each binary and text format with random flips, cuts and inserts."""
    suffix = original.split("-")[0]
    blob = data.draw(mutated(VALID[original]))
    with tempfile.TemporaryDirectory() as tmp:
        f = write(Path(tmp) / f"x{suffix}", blob)
        check_data(lambda: load(f))


@FEW
@given(npz_member=st.one_of(BYTES, st.binary(max_size=40).map(lambda b: b"\x93NUMPY\x01\x00" + b)),
       name=st.sampled_from(["responses.npy", "model_id.npy", "x.npy", "responses"]))
def test_npz_with_random_member(npz_member, name):
    """A well-formed zip whose .npy members are random bytes (or a random header after the NPY magic)."""
    sink = io.BytesIO()
    with zipfile.ZipFile(sink, "w") as zf:
        zf.writestr(name, npz_member)
        zf.writestr("model_id.npy" if name != "model_id.npy" else "responses.npy", npz_member)
    with tempfile.TemporaryDirectory() as tmp:
        f = write(Path(tmp) / "x.npz", sink.getvalue())
        check_data(lambda: load(f))


@FEW
@given(responses=BYTES | st.just(VALID[".npz"]), models=BYTES | TEXT_BYTES, items=st.none() | BYTES)
def test_random_bytes_nt_folder(responses, models, items):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "nt"
        write(root / "responses.npy", responses)
        write(root / "models.csv", models)
        if items is not None:
            write(root / "items.csv", items)
        check_data(lambda: load(root))


@FEW
@given(results=BYTES, samples=BYTES | TEXT_BYTES)
def test_random_bytes_lm_eval_folder(results, samples):
    """An lm-eval output folder (two models) whose results JSON and samples JSONL are random bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "out"
        for model in ("org__a", "org__b"):
            write(root / model / f"results_{TS1}.json", results)
            write(root / model / f"samples_arc_easy_{TS1}.jsonl", samples)
        check_data(lambda: load(root))


@FEW
@given(run_spec=BYTES | st.just(dumps({"adapter_spec": {"model": "m"}}).encode()), stats=BYTES | TEXT_BYTES)
def test_random_bytes_helm_folder(run_spec, stats):
    """A HELM suite (two runs) whose run_spec.json or per_instance_stats.json are random bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "suite"
        for run in ("r1", "r2"):
            write(root / run / "run_spec.json", run_spec)
            write(root / run / "per_instance_stats.json", stats)
        check_data(lambda: load(root))


@FEW
@given(body=BYTES, suffix=st.sampled_from([".json", ".eval"]))
def test_random_bytes_inspect_log(body, suffix):
    """Files that look like Inspect logs (JSON header, zip with header.json) but hold random bytes.

    Without inspect_ai installed the answer is the one-line install hint, with it Inspect's reader refuses."""
    with tempfile.TemporaryDirectory() as tmp:
        if suffix == ".json":
            blob = b'{"version": 2, "status": "' + body
        else:
            sink = io.BytesIO()
            with zipfile.ZipFile(sink, "w") as zf:
                zf.writestr("header.json", body)
                zf.writestr("samples/1_epoch_1.json", body)
            blob = sink.getvalue()
        f = write(Path(tmp) / "logs" / f"a{suffix}", blob)
        check_data(lambda: load(f))
        check_data(lambda: load(f.parent))


@pytest.mark.parametrize("reader", ["spec", "analysis"])
@FEW
@given(body=BYTES | TEXT_BYTES)
def test_random_bytes_toml(reader, body):
    with tempfile.TemporaryDirectory() as tmp:
        f = write(Path(tmp) / "x.toml", body)
        if reader == "spec":
            check_spec(f)
        else:
            check_analysis(f)


# ------------------------------------------------------------------------------------------- plausible files


@FUZZ
@given(table=wide_table(), options=st.fixed_dictionaries({}, optional={
    "orientation": st.sampled_from(["auto", "items_by_models", "models_by_items", "sideways"]),
    "id_column": st.sampled_from([None, "auto", "model", "Q1", ""]),
}), drop_empty=st.booleans())
def test_wide_csv_plausible(table, options, drop_empty):
    suffix, text = table
    with tempfile.TemporaryDirectory() as tmp:
        f = write(Path(tmp) / f"wide{suffix}", text)
        check_data(lambda: load(f, drop_empty=drop_empty, **options))


@FUZZ
@given(table=long_table(), drop_empty=st.booleans())
def test_long_csv_plausible(table, drop_empty):
    suffix, text, options = table
    with tempfile.TemporaryDirectory() as tmp:
        f = write(Path(tmp) / f"long{suffix}", text)
        check_data(lambda: load(f, drop_empty=drop_empty))
        check_data(lambda: read_long(f, drop_empty=drop_empty, **options))


@FUZZ
@given(blob=parquet_bytes(), suffix=st.sampled_from([".parquet", ".pq"]), drop_empty=st.booleans(),
       options=st.dictionaries(st.sampled_from(["model", "item", "correct"]), st.sampled_from(LONG_COLUMNS),
                               max_size=1))
@pytest.mark.slow
def test_parquet_plausible(blob, suffix, drop_empty, options):
    with tempfile.TemporaryDirectory() as tmp:
        f = write(Path(tmp) / f"long{suffix}", blob)
        check_data(lambda: load(f, drop_empty=drop_empty, **options))


@FUZZ
@given(arrays_=nt_arrays(), compressed=st.booleans(), drop_empty=st.booleans())
def test_npz_plausible(arrays_, compressed, drop_empty):
    with tempfile.TemporaryDirectory() as tmp:
        f = write(Path(tmp) / "nt.npz", npz_bytes(arrays_, compressed))
        check_data(lambda: load(f, drop_empty=drop_empty))


@FEW
@given(data=st.data())
def test_nt_folder_plausible(data):
    n_items, n_models = data.draw(st.integers(0, 4)), data.draw(st.integers(0, 4))
    responses = data.draw(responses_array(n_items, n_models) | ANY_ARRAY | OBJECT_ARRAY)
    models = data.draw(id_csv("model_id", ("family", "owner"), n_models))
    items = data.draw(st.none() | id_csv("item_id", ("item_group",), n_items))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "nt"
        write(root / "responses.npy", npy_bytes(responses))
        write(root / "models.csv", models)
        if items is not None:
            write(root / "items.csv", items)
        check_data(lambda: load(root, drop_empty=data.draw(st.booleans())))


@st.composite
def small_matrix(draw: st.DrawFn) -> tuple[np.ndarray, list[str], list[str]]:
    """A valid 2-4 x 2-4 response matrix (0, 1, NaN; maybe an empty row or column) with its ids."""
    n_items, n_models = draw(st.integers(2, 4)), draw(st.integers(2, 4))
    cells = draw(arrays(np.float64, (n_items, n_models), elements=st.sampled_from([0.0, 1.0, 0.0, 1.0, np.nan])))
    models = draw(st.permutations(["org/a", "org/b", "gpt-4o", "meta-llama/Llama-3-8B"]))[:n_models]
    return cells, [f"q{i}" for i in range(n_items)], models


def _code(value: float) -> str:
    return "" if np.isnan(value) else str(int(value))


@st.composite
def edited_rows(draw: st.DrawFn, rows: list[list[str]], cell: st.SearchStrategy[str]) -> list[list[str]]:
    """``rows`` (header first) with 0-3 plausible edits: a cell replaced, a cell dropped, a row duplicated."""
    rows = [list(r) for r in rows]
    for _ in range(draw(st.integers(0, 3))):
        r = draw(st.integers(0, len(rows) - 1))
        op = draw(st.sampled_from(["replace", "replace", "drop", "duplicate"]))
        if op == "duplicate":
            rows.insert(r, list(rows[r]))
        elif rows[r]:
            c = draw(st.integers(0, len(rows[r]) - 1))
            if op == "replace":
                rows[r][c] = draw(cell)
            else:
                del rows[r][c]
    return rows


@st.composite
def mostly_valid(draw: st.DrawFn, fmt: str) -> dict[str, bytes | str]:
    """Files of one format holding a valid matrix, then lightly edited: reaches the checks after parsing."""
    cells, items, models = draw(small_matrix())
    if fmt == "wide":
        if draw(st.booleans()):  # items x models
            rows = [["", *models]] + [[i, *map(_code, row)] for i, row in zip(items, cells, strict=True)]
        else:
            rows = [["model", *items]] + [[m, *map(_code, col)] for m, col in zip(models, cells.T, strict=True)]
        rows = draw(edited_rows(rows, CELL | HEADER))
        return {"x.csv": "\n".join(",".join(r) for r in rows) + "\n"}
    long_rows = [[m, i, _code(cells[k, j]), f"g{k % 2}"] for j, m in enumerate(models) for k, i in enumerate(items)
                 if not np.isnan(cells[k, j]) or draw(st.booleans())]
    if fmt == "long":
        rows = draw(edited_rows([["model", "item", "correct", "item_group"], *long_rows], CELL | ID))
        return {"x.csv": "\n".join(",".join(r) for r in rows) + "\n"}
    if fmt == "parquet":
        columns = [pa.array([r[0] for r in long_rows]), pa.array([r[1] for r in long_rows]),
                   pa.array([None if r[2] == "" else float(r[2]) for r in long_rows], pa.float64()),
                   pa.array([r[3] for r in long_rows])]
        names = ["model", "item", "correct", "item_group"]
        for _ in range(draw(st.integers(0, 2))):
            k = draw(st.integers(0, 3))
            if draw(st.booleans()):
                columns[k] = draw(_arrow_column(len(long_rows)))
            else:
                names[k] = draw(st.sampled_from(LONG_COLUMNS) | HEADER)
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_arrays(columns, names=names), sink)
        return {"x.parquet": sink.getvalue()}
    y = np.where(np.isnan(cells), -1, cells).astype(np.int8) if draw(st.booleans()) else cells
    found = {"responses": y, "model_id": np.array(models), "item_id": np.array(items),
             "item_group": np.array([f"g{k % 2}" for k in range(len(items))])}
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(sorted(found)))
        op = draw(st.sampled_from(["any", "id"]))
        if op == "any" or found[key].ndim != 1 or found[key].dtype.kind != "U":
            found[key] = draw(ANY_ARRAY | OBJECT_ARRAY)
        else:
            changed = found[key].astype(object)
            changed[draw(st.integers(0, len(changed) - 1))] = draw(ID)
            found[key] = np.array(changed.tolist(), dtype=str)
    if fmt == "npz":
        return {"x.npz": npz_bytes(found, draw(st.booleans()))}
    files: dict[str, bytes | str] = {"nt/responses.npy": npy_bytes(found["responses"])}
    for fname, id_col, extra in (("models.csv", "model_id", ()), ("items.csv", "item_id", ("item_group",))):
        if id_col in found and found[id_col].ndim == 1:
            table = pd.DataFrame({c: [str(v) for v in found[c].tolist()] for c in (id_col, *extra)
                                  if c in found and found[c].shape == found[id_col].shape})
            rows = draw(edited_rows([list(table.columns), *table.to_numpy().tolist()], ID))
            files[f"nt/{fname}"] = "\n".join(",".join(r) for r in rows) + "\n"
    return files


@pytest.mark.parametrize("fmt", ["wide", "long", "parquet", "npz", "nt-folder"])
@FUZZ
@given(data=st.data(), drop_empty=st.booleans())
@pytest.mark.slow
def test_mostly_valid(fmt, data, drop_empty):
    """A valid matrix written in each format, then lightly edited (cells, ids, dtypes, column names)."""
    files = data.draw(mostly_valid(fmt))
    with tempfile.TemporaryDirectory() as tmp:
        for rel, content in files.items():
            write(Path(tmp) / rel, content)
        target = Path(tmp) / next(iter(files)).split("/")[0]
        options = {"model": "model"} if fmt == "long" and data.draw(st.booleans()) else {}  # else 4 columns: wide
        check_data(lambda: load(target, drop_empty=drop_empty, **options))


@FUZZ
@given(files=lm_folder(), options=LM_OPTIONS, drop_empty=st.booleans())
@pytest.mark.slow
def test_lm_eval_plausible(files, options, drop_empty):
    """lm-eval folders whose JSONL lines are truncated, not objects, lack doc_id or hold odd metric values."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "out"
        for rel, blob in files.items():
            if blob is not None:
                write(root / rel, blob)
        check_data(lambda: load(root, drop_empty=drop_empty, **options))


@FUZZ
@given(data=st.data())
def test_lm_eval_mostly_valid(data):
    """Valid lm-eval folders with one line replaced: finds the errors raised late (filters, pivot)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "out"
        for model in ("org__a", "org__b"):
            lines = _lm_valid_lines(model).splitlines()
            if data.draw(st.booleans()):
                lines[data.draw(st.integers(0, len(lines) - 1))] = data.draw(JSONL_LINE)
            write(root / model / f"samples_arc_easy_{TS1}.jsonl", b"\n".join(lines) + b"\n")
        check_data(lambda: load(root, **data.draw(st.just({}) | LM_OPTIONS)))


@FUZZ
@given(runs=st.tuples(helm_run("m/a"), helm_run("m/b")), options=HARNESS_OPTIONS.flatmap(
    lambda o: st.fixed_dictionaries({}, optional={"stat": st.sampled_from(["exact_match", "f1_score", "x"])}).map(
        lambda s: {**o, **s})), drop_empty=st.booleans())
@pytest.mark.slow
def test_helm_plausible(runs, options, drop_empty):
    """HELM suites whose specs and per-instance stats have fields missing or of the wrong type."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "suite"
        for name, files in zip(("run-a", "run-b"), runs, strict=True):
            for fname, blob in files.items():
                write(root / name / fname, blob)
        check_data(lambda: load(root, drop_empty=drop_empty, **options))


@FUZZ
@given(data=st.data())
@pytest.mark.slow
def test_helm_mostly_valid(data):
    """Valid HELM runs with one stat replaced by a random one."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "suite"
        for model in ("m/a", "m/b"):
            files = _helm_valid(model)
            stats = json.loads(files["per_instance_stats.json"])
            stats[data.draw(st.integers(0, len(stats) - 1))]["stats"] = [data.draw(helm_stat())]
            files["per_instance_stats.json"] = dumps(stats).encode()
            for fname, blob in files.items():
                write(root / model.replace("/", "_") / fname, blob)
        check_data(lambda: load(root))


@pytest.mark.skipif(not HAVE_INSPECT, reason="needs the optional inspect_ai package")
@FEW
@given(values=st.lists(st.lists(st.sampled_from(["C", "I", "P", "N", "yes", "0.5", "x", 1, 0.25, True, None])
                                | st.just([1, 0]) | st.just({"a": 1}), min_size=1, max_size=2), min_size=1,
                       max_size=3), metric=st.none() | st.sampled_from(["choice", "other"]), options=HARNESS_OPTIONS)
def test_inspect_plausible(values, metric, options):  # pragma: no cover - runs only with inspect_ai installed
    log_api = pytest.importorskip("inspect_ai.log")
    from inspect_ai.scorer import Score

    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp) / "logs"
        logs.mkdir()
        for name, model in (("a.eval", "m/a"), ("b.json", "m/b")):
            spec = log_api.EvalSpec(created="2024-05-13T12:34:56+00:00", task="t",
                                    dataset=log_api.EvalDataset(name="t"), model=model,
                                    config=log_api.EvalConfig(epochs=max(len(v) for v in values)))
            samples = [log_api.EvalSample(id=sid, epoch=e + 1, input="Q?", target="A",
                                          scores=None if v is None else {"choice": Score(value=v)})
                       for sid, vs in enumerate(values, start=1) for e, v in enumerate(vs)]
            log_api.write_eval_log(log_api.EvalLog(eval=spec, samples=samples, status="success"), str(logs / name))
        check_data(lambda: load(logs, **({"metric": metric} if metric else {}), **options))


@FUZZ
@given(body=spec_document())
def test_spec_plausible(body):
    """Specs with random keys, values of the wrong types, unknown tables, NaN and infinite numbers."""
    with tempfile.TemporaryDirectory() as tmp:
        check_spec(write(Path(tmp) / "spec.toml", body))


BUILTIN_SPECS = sorted(BUILTIN_DIR.glob("*.toml"))


@FUZZ
@given(data=st.data())
def test_spec_mutated_builtin(data):
    """A built-in spec with lines deleted, duplicated or replaced, or random byte edits."""
    text = data.draw(st.sampled_from(BUILTIN_SPECS)).read_text(encoding="utf-8")
    lines = text.splitlines()
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(lines) - 1))
        op = data.draw(st.sampled_from(["delete", "duplicate", "replace"]))
        if op == "delete" and len(lines) > 1:
            del lines[pos]
        elif op == "duplicate":
            lines.insert(pos, lines[pos])
        else:
            lines[pos] = data.draw(TOML_LINE)
    blob = "\n".join(lines).encode("utf-8")
    if data.draw(st.booleans()):
        blob = data.draw(mutated(blob))
    with tempfile.TemporaryDirectory() as tmp:
        check_spec(write(Path(tmp) / "spec.toml", blob))


@FUZZ
@given(body=analysis_document())
def test_analysis_plausible(body):
    """Analysis files with random keys, values of the wrong types and unknown tables."""
    with tempfile.TemporaryDirectory() as tmp:
        check_analysis(write(Path(tmp) / "analysis.toml", body))


@FUZZ
@given(data=st.data())
def test_analysis_mutated(data):
    """The shipped analysis files with lines replaced by random TOML (or broken syntax)."""
    text = data.draw(st.sampled_from(sorted((ROOT / "analyses").glob("*.toml")))).read_text(encoding="utf-8")
    lines = text.splitlines()
    for _ in range(data.draw(st.integers(1, 3))):
        lines[data.draw(st.integers(0, len(lines) - 1))] = data.draw(TOML_LINE)
    with tempfile.TemporaryDirectory() as tmp:
        check_analysis(write(Path(tmp) / "analysis.toml", "\n".join(lines)))


# ------------------------------------------------------------------------------------------- the corpus
#
# Hand-written malformed inputs, one per fault, each with the fragment its one-line message must hold.
# A case is (id, files, target, reader, options, expected): ``files`` maps paths (relative to a fresh
# folder) to contents; ``target`` is the path handed to the reader ("spec" = load_spec, "analysis" =
# load_analysis, "load" = bayesirt.data.load). Cases marked "regression" are crashes the fuzzing found.

GOOD_SPEC = (
    '[priors.theta]\ndistribution = "normal"\nmu = 0\nsigma = 1\n'
    '[priors.discrimination]\ndistribution = "lognormal"\nmu = 0\nsigma = 0.5\n'
    '[priors.intercept]\ndistribution = "normal"\nmu = 0\nsigma = 2\n'
)
ANALYSIS_HEAD = '[analysis]\nkind = "fit"\ndata = "lsat6"\nmodel = "2pl"\nout = "o"\n'


def _parquet(df: pd.DataFrame | pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(df if isinstance(df, pa.Table) else pa.Table.from_pandas(df, preserve_index=False), sink)
    return sink.getvalue()


def _lm(lines_a: bytes, lines_b: bytes | None = None, results: bytes | None = None) -> dict[str, bytes]:
    files = {f"out/org__a/samples_arc_easy_{TS1}.jsonl": lines_a,
             f"out/org__b/samples_arc_easy_{TS1}.jsonl": _lm_valid_lines("org__b") if lines_b is None else lines_b,
             # lm-eval writes a results JSON beside the samples (without one the folder is refused: its model is
             # unknown); a minimal one, so the damage under test is what is reached
             f"out/org__a/results_{TS1}.json": b'{"model_name": "org/a"}' if results is None else results,
             f"out/org__b/results_{TS1}.json": b'{"model_name": "org/b"}'}
    return files


def _helm(stats_a: bytes | None = None, spec_a: bytes | None = None) -> dict[str, bytes]:
    files = {}
    for model in ("m/a", "m/b"):
        for fname, blob in _helm_valid(model).items():
            if model == "m/a" and fname == "per_instance_stats.json" and stats_a is not None:
                blob = stats_a
            if model == "m/a" and fname == "run_spec.json" and spec_a is not None:
                blob = spec_a
            files[f"suite/{model.replace('/', '_')}/{fname}"] = blob
    return files


def _huge_npy_header() -> bytes:
    """An NPY member whose header claims 10^15 float64 values (8 PB) and holds none."""
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000000,), }"
    header = header + " " * (63 - (len(header) + 10) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()


def _zip(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    sink = io.BytesIO()
    with zipfile.ZipFile(sink, "w", compression=compression) as zf:
        for name, blob in members.items():
            zf.writestr(name, blob)
    return sink.getvalue()


def _corrupt_deflate() -> bytes:
    """A compressed NPZ whose deflate stream is damaged (first byte of the responses member flipped): zlib.error."""
    blob = bytearray(_valid_npz(True))
    info = zipfile.ZipFile(io.BytesIO(bytes(blob))).getinfo("responses.npy")
    name_len = int.from_bytes(blob[info.header_offset + 26:info.header_offset + 28], "little")
    extra_len = int.from_bytes(blob[info.header_offset + 28:info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_len + extra_len
    blob[start] ^= 0xFF
    return bytes(blob)


def _parquet_invalid_utf8() -> bytes:
    """A long Parquet file whose model id 'org/b' holds a byte that is not UTF-8 (pyarrow checks only on use)."""
    table = pa.table({"model": ["org/a", "org/a", "org/b", "org/b"], "item": ["q1", "q2", "q1", "q2"],
                      "correct": [1, 0, 0, 1]})
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="NONE", use_dictionary=False, write_statistics=False)
    blob = bytearray(sink.getvalue())
    blob[blob.index(b"org/b") + 3] = 0xFF
    return bytes(blob)


def _npz_central_header(offset: int, value: int) -> bytes:
    """A valid NPZ whose first central-directory entry has byte ``offset`` set to ``value``."""
    blob = bytearray(npz_bytes({"responses": R22, "model_id": np.array(["a", "b"])}, False))
    blob[blob.index(b"PK\x01\x02") + offset] = value
    return bytes(blob)


def _nc_byte(offset: int, value: int) -> bytes:
    blob = bytearray(VALID[".nc"])
    blob[offset] = value
    return bytes(blob)


#: the byte the fuzzing found: set in the response file that save_responses writes with h5py 3.16 / HDF5 2.0 /
#: h5netcdf 1.8 (14,528 bytes), it makes h5netcdf fail in H5DSget_num_scales with a RuntimeError
NC_LAYOUT = len(VALID[".nc"]) == 14528 and VALID[".nc"][2783] == 0

NPZ_IDS = {"model_id": np.array(["a", "b"]), "item_id": np.array(["q1", "q2"])}
R22 = np.array([[1, 0], [0, 1]], dtype=np.int8)
BIG = "1" + "0" * 400  # a JSON integer beyond float range
HUGE = "1" + "0" * 5000  # a JSON integer beyond Python's 4300-digit str -> int limit
DEEP = "[" * 100_000  # JSON nested deeper than the parser's recursion limit


def _lm_line(**fields: Any) -> bytes:
    return (dumps({"doc_id": 0, "metrics": ["acc"], "acc": 1.0} | fields) + "\n").encode()


CORPUS = [
    # --- Parquet (long)
    ("parquet-random-bytes", {"x.parquet": b"PAR1 not a parquet file PAR1"}, "x.parquet", "load", {},
     r"cannot read .*x\.parquet"),
    ("parquet-truncated", {"x.parquet": VALID[".parquet"][:-40]}, "x.parquet", "load", {}, r"cannot read .*x\.parquet"),
    ("parquet-lacks-correct", {"x.parquet": _parquet(_long_frame().drop(columns="correct"))}, "x.parquet", "load", {},
     r"lacks column\(s\) \['correct'\]"),
    ("parquet-blank-model-id",
     {"x.parquet": _parquet(_long_frame().assign(model=lambda d: d["model"].where(d.index > 0)))},
     "x.parquet", "load", {}, r"column 'model' has a blank id in data row 1"),
    ("parquet-duplicate-rows", {"x.parquet": _parquet(pd.concat([_long_frame(), _long_frame()[:1]]))}, "x.parquet",
     "load", {}, r"duplicate rows for model 'meta-llama/Llama-3-8B', item 'q1'"),
    ("parquet-value-2", {"x.parquet": _parquet(_long_frame().assign(correct=2.0))}, "x.parquet", "load", {},
     r"values other than 0, 1 or missing \(found 2"),
    ("parquet-words", {"x.parquet": _parquet(_long_frame().assign(correct="yes"))}, "x.parquet", "load", {},
     r"non-numeric value \(found 'yes'"),
    ("parquet-list-item-group (regression)",
     {"x.parquet": _parquet(pa.table({"model": ["a", "a", "b", "b"], "item": ["q1", "q2", "q1", "q2"],
                                      "correct": [1, 0, 0, 1], "item_group": [[1], [1], [2], [1]]}))},
     "x.parquet", "load", {}, r"column 'item_group' holds lists or other non-scalar values"),
    ("parquet-list-model-id (regression)",
     {"x.parquet": _parquet(pa.table({"model": [[1], [1], [2], [2]], "item": ["q1", "q2", "q1", "q2"],
                                      "correct": [1, 0, 0, 1]}))},
     "x.parquet", "load", {}, r"column 'model' holds lists or other non-scalar values"),
    ("parquet-invalid-utf8 (regression)", {"x.parquet": _parquet_invalid_utf8()}, "x.parquet", "load", {},
     r"cannot read .*x\.parquet \(ArrowInvalid: .*Invalid UTF8 sequence"),
    ("parquet-duplicate-columns",
     {"x.parquet": _parquet(pa.Table.from_arrays([pa.array(["a", "b"]), pa.array(["q1", "q1"]), pa.array([1, 0]),
                                                  pa.array(["x", "y"])], names=["model", "item", "correct", "model"]))},
     "x.parquet", "load", {}, r"cannot read .*x\.parquet \(ArrowInvalid: Multiple matches for FieldRef\.Name\(model\)"),
    # --- NPZ and the NPY+CSV folder
    ("npz-no-responses", {"x.npz": npz_bytes({"model_id": np.array(["a", "b"])}, False)}, "x.npz", "load", {},
     r"NPZ lacks the array 'responses' \(has \['model_id'\]\); save the matrix as responses=, with optional item_id, "
     r"model_id, item_group, testlet, family, owner"),
    ("npz-object-responses", {"x.npz": npz_bytes({"responses": R22.astype(object), **NPZ_IDS}, False)}, "x.npz",
     "load", {}, r"'responses' is a pickled object array"),
    ("npz-1d-responses", {"x.npz": npz_bytes({"responses": np.array([1, 0]), **NPZ_IDS}, False)}, "x.npz", "load", {},
     r"must be a 2-D items x models matrix, got 1 dimension"),
    ("npz-3d-responses", {"x.npz": npz_bytes({"responses": np.zeros((2, 2, 2)), **NPZ_IDS}, False)}, "x.npz", "load",
     {}, r"got 3 dimension"),
    ("npz-model-id-too-long", {"x.npz": npz_bytes({"responses": R22, "model_id": np.array(["a", "b", "c"])}, False)},
     "x.npz", "load", {}, r"model_id has 3 entries but the matrix has 2 models"),
    ("npz-2d-model-id", {"x.npz": npz_bytes({"responses": R22, "model_id": np.array([["a", "b"]])}, False)}, "x.npz",
     "load", {}, r"model_id must be one-dimensional, got shape \(1, 2\)"),
    ("npz-non-utf8-ids", {"x.npz": npz_bytes({"responses": R22, "model_id": np.array([b"\xff", b"b"])}, False)},
     "x.npz", "load", {}, r"cannot read .*x\.npz \(UnicodeDecodeError"),
    ("npz-complex-responses", {"x.npz": npz_bytes({"responses": R22 + 0j, **NPZ_IDS}, False)}, "x.npz", "load", {},
     r"non-numeric value \(found \(1\+0j\)"),
    ("npz-truncated", {"x.npz": VALID[".npz"][:100]}, "x.npz", "load", {}, r"cannot read .*x\.npz"),
    ("npz-bad-deflate (regression)", {"x.npz": _corrupt_deflate()}, "x.npz", "load", {},
     r"cannot read .*x\.npz \(error: Error -3 while decompressing data.*\); check that it is a valid \.npz file"),
    ("npz-huge-shape (regression)", {"x.npz": _zip({"responses.npy": _huge_npy_header(),
                                                    "model_id.npy": npy_bytes(np.array(["a", "b"]))})},
     "x.npz", "load", {}, r"cannot read .*x\.npz: it would need more memory than is available"),
    ("npz-is-a-npy (regression)", {"x.npz": npy_bytes(R22)}, "x.npz", "load", {},
     r"x\.npz is not an NPZ archive \(a zip of \.npy arrays\); write it with np\.savez"),
    ("npz-member-not-npy (regression)",
     {"x.npz": _zip({"responses.npy": b"", "model_id.npy": npy_bytes(np.array(["a"]))})},
     "x.npz", "load", {}, r"member 'responses' of the NPZ is not a NumPy \.npy array"),
    ("npz-zip-version-6.4 (regression)", {"x.npz": _npz_central_header(6, 64)}, "x.npz", "load", {},
     r"cannot read .*x\.npz \(NotImplementedError: zip file version 6\.4\)"),
    ("npz-strong-encryption (regression)", {"x.npz": _npz_central_header(8, 0x40)}, "x.npz", "load", {},
     r"cannot read .*x\.npz \(NotImplementedError: strong encryption \(flag bit 6\)\)"),
    ("nt-folder-npy-not-numpy (message fix)", {"nt/responses.npy": b"hello", "nt/models.csv": "model_id\na\nb\n"},
     "nt", "load", {}, r"responses\.npy is not a NumPy \.npy file; write it with np\.save"),
    ("nt-folder-random-npy", {"nt/responses.npy": b"\x93NUMPY garbage", "nt/models.csv": "model_id\na\nb\n"}, "nt",
     "load", {}, r"cannot read .*responses\.npy"),
    ("nt-folder-no-model-id", {"nt/responses.npy": npy_bytes(R22), "nt/models.csv": "name\na\nb\n"}, "nt", "load", {},
     r"models\.csv: missing column 'model_id'"),
    ("nt-folder-short-models", {"nt/responses.npy": npy_bytes(R22), "nt/models.csv": "model_id\na\n"}, "nt", "load", {},
     r"model_id has 1 entries but the matrix has 2 models"),
    ("nt-folder-huge-shape (regression)", {"nt/responses.npy": _huge_npy_header(), "nt/models.csv": "model_id\na\nb\n"},
     "nt", "load", {}, r"cannot read .*responses\.npy: it would need more memory than is available"),
    # --- NetCDF (bayesirt's own response files)
    ("nc-random-bytes", {"x.nc": b"\x89HDF\r\n\x1a\n garbage"}, "x.nc", "load", {}, r"cannot read .*x\.nc"),
    ("nc-truncated", {"x.nc": VALID[".nc"][:4000]}, "x.nc", "load", {}, r"cannot read .*x\.nc"),
    pytest.param("nc-corrupt-dimension-scale (regression)", {"x.nc": _nc_byte(2783, 43)}, "x.nc", "load", {},
                 r"cannot read .*x\.nc \(RuntimeError: Unspecified error in H5DSget_num_scales",
                 marks=pytest.mark.skipif(not NC_LAYOUT, reason="byte offset measured on another HDF5 file layout")),
    # --- lm-eval --log_samples folders
    ("lm-eval-truncated-line", _lm(_lm_line() + _lm_line(doc_id=1)[:20] + b"\n"), "out", "load", {},
     r"samples_arc_easy_.*\.jsonl: line 2 is not valid JSON"),
    ("lm-eval-line-not-object", _lm(b"[1, 2]\n"), "out", "load", {}, r"line 1 is not a JSON object"),
    ("lm-eval-no-doc-id", _lm(dumps({"metrics": ["acc"], "acc": 1}).encode() + b"\n"), "out", "load", {},
     r"line 1 has no scalar 'doc_id'"),
    ("lm-eval-list-doc-id", _lm(_lm_line(doc_id=[0])), "out", "load", {}, r"line 1 has no scalar 'doc_id'"),
    ("lm-eval-metric-string", _lm(_lm_line(acc="1")), "out", "load", {},
     r"line 1: metric 'acc' is \"1\", not a finite number"),
    ("lm-eval-metric-null", _lm(_lm_line(acc=None)), "out", "load", {}, r"metric 'acc' is null, not a finite number"),
    ("lm-eval-metric-nan", _lm(_lm_line(acc=float("nan"))), "out", "load", {}, r"metric 'acc' is NaN, not a finite"),
    ("lm-eval-no-metrics-list", _lm(dumps({"doc_id": 0, "acc": 1}).encode() + b"\n"), "out", "load", {},
     r"line 1 has no 'metrics' list naming its metrics; pass metric=NAME"),
    ("lm-eval-not-utf8", _lm(b"\xff\xfe\n"), "out", "load", {},
     r"samples_arc_easy_.*\.jsonl: not UTF-8 text \(a damaged lm-eval samples file\); pass --on-damaged skip"),
    ("lm-eval-results-not-object", _lm(_lm_valid_lines("org__a"), results=b"[1]"), "out", "load", {},
     r"results_.*\.json is not an lm-eval results file \(expected a JSON object\)"),
    ("lm-eval-results-random", _lm(_lm_valid_lines("org__a"), results=b"\x00\x01garbage"), "out", "load", {},
     r"results_.*\.json: the results file is not valid JSON \(.*\), so the run's model is unknown; pass --on-damaged"),
    ("lm-eval-metric-beyond-float (regression)", _lm(f'{{"doc_id": 0, "metrics": ["acc"], "acc": {BIG}}}\n'.encode()),
     "out", "load", {}, r"line 1: metric 'acc' is 1000.*, not a finite number"),
    ("lm-eval-4301-digit-number (regression)",
     _lm(f'{{"doc_id": 0, "metrics": ["acc"], "acc": {HUGE}}}\n'.encode()), "out", "load", {},
     r"line 1 is not valid JSON \(a number with more than 4300 digits"),
    ("lm-eval-deep-nesting (regression)", _lm(_lm_line() + DEEP.encode() + b"\n"), "out", "load", {},
     r"line 2 is not valid JSON \(arrays or objects nested too deeply"),
    ("lm-eval-results-deep-nesting (regression)", _lm(_lm_valid_lines("org__a"), results=DEEP.encode()), "out",
     "load", {}, r"results_.*\.json: the results file is not valid JSON \(arrays or objects nested too deeply"),
    ("lm-eval-results-4301-digits (regression)", _lm(_lm_valid_lines("org__a"), results=HUGE.encode()), "out",
     "load", {}, r"results_.*\.json: the results file is not valid JSON \(a number with more than 4300 digits"),
    ("lm-eval-metric-name-with-newline (regression)", _lm(_lm_line(metrics=["two\nlines"])), "out", "load", {},
     r"has no metric 'two\\nlines' \(its metrics: 'two\\nlines'\)"),
    ("lm-eval-filter-with-newline (regression)",
     _lm(_lm_line(filter="two\nlines") + _lm_line(doc_id=1, filter="two\nlines")),
     "out", "load", {"filter": "x"}, r"has no records for filter 'x' \(filters: 'two\\nlines', none\)"),
    ("lm-eval-model-name-with-newline (regression)",
     {f"out/org__a/samples_arc_easy_{TS1}.jsonl": _lm_valid_lines("org__a"),
      f"out/org__a/results_{TS1}.json": dumps({"model_name": "two\nlines"})}, "out", "load", {},
     r"found 3 item\(s\) x 1 model\(s\) \('two\\nlines'\)"),
    # --- HELM runs
    ("helm-stats-not-list", _helm(stats_a=b'{"a": 1}'), "suite", "load", {},
     r"per_instance_stats\.json is not a list of per-instance stats"),
    ("helm-entry-not-object", _helm(stats_a=b"[1]"), "suite", "load", {},
     r"per_instance_stats\.json: entry 0 lacks instance_id or a stats list"),
    ("helm-spec-random", _helm(spec_a=b"\x00garbage"), "suite", "load", {},
     r"m_a: run_spec\.json is not valid JSON \(Expecting value at line 1, column 1\); pass --on-damaged skip"),
    ("helm-spec-not-utf8", _helm(spec_a=b'{"a": "\xff"}'), "suite", "load", {},
     r"m_a: run_spec\.json is not UTF-8 text; pass --on-damaged skip"),
    ("helm-spec-list", _helm(spec_a=b"[]"), "suite", "load", {}, r"run_spec\.json has no adapter_spec\.model"),
    ("helm-no-such-stat", _helm(), "suite", "load", {"stat": "bleu"},
     r"has the unperturbed stat 'bleu'; pass stat= one of: exact_match"),
    ("helm-mean-beyond-float (regression)",
     _helm(stats_a=('[{"instance_id": "id0", "stats": [{"name": {"name": "exact_match"}, "mean": ' + BIG + "}]}]")
           .encode()), "suite", "load", {}, r"found 3 item\(s\) x 1 model\(s\) \(m/b\)"),
    ("helm-sum-beyond-float (regression)",
     _helm(stats_a=('[{"instance_id": "id0", "stats": [{"name": {"name": "exact_match"}, "count": 1, "sum": '
                    + BIG + "}]}]").encode()), "suite", "load", {}, r"found 3 item\(s\) x 1 model\(s\) \(m/b\)"),
    ("helm-deep-nesting (regression)", _helm(stats_a=DEEP.encode()), "suite", "load", {},
     r"m_a: per_instance_stats\.json is not valid JSON \(arrays or objects nested too deeply"),
    ("helm-4301-digits (regression)", _helm(stats_a=HUGE.encode()), "suite", "load", {},
     r"m_a: per_instance_stats\.json is not valid JSON \(a number with more than 4300 digits"),
    ("helm-stat-name-with-newline (regression)",
     _helm(stats_a=dumps([{"instance_id": "id0", "stats": [{"name": {"name": "two\nlines"}, "mean": 1}]}]).encode())
     | {f"suite/m_b/{f}": b for f, b in _helm_valid("m/b").items() if f == "run_spec.json"}
     | {"suite/m_b/per_instance_stats.json": b"[]"}, "suite", "load", {},
     r"has the unperturbed stat 'exact_match'; pass stat= one of: 'two\\nlines'"),
    # --- Inspect AI logs
    ("inspect-json-truncated", {"logs/a.json": b'{"version": 2, "status": "success", "eval": {'}, "logs/a.json", "load",
     {}, r"a\.json: the JSON log is not valid JSON \(Expecting property name .*\); pass --on-damaged skip"),
    ("inspect-eval-garbage-header", {"logs/a.eval": _zip({"header.json": b"\x00garbage"})}, "logs/a.eval", "load", {},
     r"a\.eval: header\.json is not valid JSON \(Expecting value at line 1, column 1\); pass --on-damaged skip"),
    # --- model specs
    ("spec-not-utf8 (regression)", {"s.toml": b"name = '\xff'\n" + GOOD_SPEC.encode()}, "s.toml", "spec", {},
     r"s\.toml: not UTF-8 text \(byte 0xff on line 1\); save the file as UTF-8"),
    ("spec-sigma-nan (regression)", {"s.toml": GOOD_SPEC.replace("sigma = 2", "sigma = nan")}, "s.toml", "spec", {},
     r"\[priors\.intercept\]: 'sigma' must be a finite number; got nan"),
    ("spec-mu-inf (regression)", {"s.toml": GOOD_SPEC.replace("mu = 0\nsigma = 1", "mu = -inf\nsigma = 1")}, "s.toml",
     "spec", {}, r"\[priors\.theta\]: 'mu' must be a finite number; got -inf"),
    ("spec-fixed-value-inf (regression)",
     {"s.toml": GOOD_SPEC.replace('distribution = "lognormal"\nmu = 0\nsigma = 0.5',
                                  'structure = "fixed"\nvalue = inf')},
     "s.toml", "spec", {}, r"'value' must be a finite number; got inf"),
    ("spec-4301-digit-integer (regression)", {"s.toml": GOOD_SPEC.replace("sigma = 2", f"sigma = {HUGE}")}, "s.toml",
     "spec", {}, r"s\.toml: not valid TOML \(a number with more than 4300 digits\)"),
    ("spec-deep-nesting (regression)", {"s.toml": "a = " + DEEP}, "s.toml", "spec", {},
     r"s\.toml: not valid TOML \(arrays or inline tables nested too deeply\)"),
    ("spec-integer-beyond-float (regression)", {"s.toml": GOOD_SPEC.replace("sigma = 2", f"sigma = {BIG}")}, "s.toml",
     "spec", {}, r"'sigma' must be a finite number; got an integer of 401 digits"),
    ("spec-empty", {"s.toml": ""}, "s.toml", "spec", {}, r"missing the \[priors\] tables"),
    ("spec-priors-not-table", {"s.toml": "priors = 5\n"}, "s.toml", "spec", {}, r"missing the \[priors\] tables"),
    ("spec-unknown-table", {"s.toml": GOOD_SPEC.replace("[priors.theta]\n", "[priors]\ntheta = 1\n[x]\n", 1)},
     "s.toml", "spec", {}, r"unknown top-level key\(s\) \['x'\]"),
    ("spec-prior-scalar", {"s.toml": "[priors]\ntheta = 1\n" + GOOD_SPEC.split("[priors.theta]")[0]
                           + GOOD_SPEC.split("sigma = 1\n", 1)[1]},
     "s.toml", "spec", {}, r"\[priors\.theta\]: must be a table with 'distribution' and its parameters"),
    ("spec-distribution-number", {"s.toml": GOOD_SPEC.replace('"normal"', "1", 1)}, "s.toml", "spec", {},
     r"'distribution' must be one of \['normal'\]; got 1"),
    ("spec-sigma-date", {"s.toml": GOOD_SPEC.replace("sigma = 2", "sigma = 1979-05-27")}, "s.toml", "spec", {},
     r"'sigma' must be a number; got datetime\.date\(1979, 5, 27\)"),
    ("spec-kind-list", {"s.toml": 'kind = ["mirt"]\n' + GOOD_SPEC}, "s.toml", "spec", {},
     r"'kind' must be one of \['logistic', 'mirt'\]; got \['mirt'\]"),
    ("spec-mirt-wrong-priors", {"s.toml": 'kind = "mirt"\n' + GOOD_SPEC}, "s.toml", "spec", {},
     r"an exploratory MIRT spec declares exactly the priors \['intercept', 'loading'\]"),
    ("spec-mirt-dimensions-string",
     {"s.toml": 'kind = "mirt"\ndimensions = "2"\n[priors.loading]\ndistribution = "normal"\nmu = 0\nsigma = 1\n'
                '[priors.intercept]\ndistribution = "normal"\nmu = 0\nsigma = 1\n'},
     "s.toml", "spec", {}, r"'dimensions' must be a positive integer; got '2'"),
    ("spec-duplicate-key", {"s.toml": 'name = "a"\nname = "b"\n' + GOOD_SPEC}, "s.toml", "spec", {},
     r"not valid TOML \(Cannot overwrite a value \(at line 2, column 11\)\)"),
    # --- analysis files (bayesirt/cli/analyses.py)
    ("analysis-empty", {"a.toml": ""}, "a.toml", "analysis", {}, r"missing the \[analysis\] table"),
    ("analysis-not-table", {"a.toml": "analysis = 1\n"}, "a.toml", "analysis", {}, r"missing the \[analysis\] table"),
    ("analysis-kind-list", {"a.toml": ANALYSIS_HEAD.replace('kind = "fit"', 'kind = ["fit"]')}, "a.toml", "analysis",
     {}, r"'kind' must be one of \['fit', 'audit', 'safety'\]; got \['fit'\]"),
    ("analysis-out-number", {"a.toml": ANALYSIS_HEAD.replace('out = "o"', "out = 5")}, "a.toml", "analysis", {},
     r"\[analysis\] needs 'out'"),
    ("analysis-safety-data-string", {"a.toml": '[analysis]\nkind = "safety"\ndata = "lsat6"\nout = "o"\n'}, "a.toml",
     "analysis", {}, r"needs 'data', a list of benchmark files"),
    ("analysis-option-date", {"a.toml": ANALYSIS_HEAD + "[fit]\nseed = 1979-05-27\n"}, "a.toml", "analysis", {},
     r"\[fit\] The 'seed' parameter of fit must be a non-negative integer; got datetime"),
    ("analysis-not-utf8", {"a.toml": b"# \xff\n" + ANALYSIS_HEAD.encode()}, "a.toml", "analysis", {},
     r"a\.toml: not UTF-8 text \(byte 0xff on line 1\)"),
    ("analysis-option-table-scalar", {"a.toml": "fit = 5\n" + ANALYSIS_HEAD}, "a.toml", "analysis", {},
     r"'fit' must be a table \(\[fit\] with its options\); got 5"),
    ("analysis-4301-digit-integer", {"a.toml": ANALYSIS_HEAD + f"[fit]\nseed = {HUGE}\n"}, "a.toml", "analysis", {},
     r"a\.toml: not valid TOML \(a number with more than 4300 digits\)"),
    ("analysis-deep-nesting", {"a.toml": ANALYSIS_HEAD + "[fit]\nseed = " + DEEP + "\n"}, "a.toml", "analysis", {},
     r"a\.toml: not valid TOML \(arrays or inline tables nested too deeply\)"),
    ("analysis-simulate-scalar", {"a.toml": 'simulate = 5\n[analysis]\nkind = "audit"\ndata = "lsat6"\nout = "o"\n'},
     "a.toml", "analysis", {}, r"'simulate' must be a table \(\[simulate\] with its options\); got 5"),
]


def _case_id(case: Any) -> str:
    return (case.values if hasattr(case, "values") else case)[0]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # e.g. HELM's "run(s) skipped": only the error matters here
@pytest.mark.parametrize(("name", "files", "target", "reader", "options", "message"), CORPUS,
                         ids=[_case_id(c) for c in CORPUS])
def test_corpus(tmp_path, name, files, target, reader, options, message):
    for rel, content in files.items():
        write(tmp_path / rel, content)
    path = tmp_path / target
    call, kind = {
        "load": (lambda: load(path, **options), DataError),
        "spec": (lambda: load_spec(path), SpecError),
        "analysis": (lambda: load_analysis(path), SpecError),
    }[reader]
    with pytest.raises(kind, match=message) as err:
        call()
    check_message(err.value, kind)
    if reader == "load":
        assert str(tmp_path) in str(err.value), "the message names the file or folder"


def test_corpus_size():
    """The corpus grows with each format; its size is quoted in the issue's closing note."""
    assert len(CORPUS) >= 70
