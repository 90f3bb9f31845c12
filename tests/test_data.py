"""Tests of the data layer: validation messages, readers (round trips), families, embedded data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from bayesirt.data import (
    AMBIGUOUS,
    DATASETS,
    MISSING,
    OTHER,
    UNKNOWN_OWNER,
    derive_family,
    derive_owner,
    from_dataframe,
    list_datasets,
    load,
    load_dataset,
    make_responses,
    observed_mask,
    read_long,
    read_nt_dir,
    read_nt_npz,
    read_wide_csv,
    save_responses,
    summarize,
    validate_responses,
)
from bayesirt.data.layout import OrientationWarning
from bayesirt.errors import DataError

# 3 items x 4 models with two missing cells; rows = items.
MATRIX = np.array([[1, 0, np.nan, 1], [0, 1, 1, 1], [1, np.nan, 0, 0]])
ITEMS = ["q1", "q2", "q3"]
MODELS = ["meta-llama/Llama-3-8B", "Qwen/Qwen2-7B", "GPT-4o", "microsoft/phi-2"]


@pytest.fixture
def ds() -> xr.Dataset:
    return make_responses(MATRIX, item_id=ITEMS, model_id=MODELS, name="toy")


def assert_same(a: xr.Dataset, b: xr.Dataset) -> None:
    """Same cells, ids and metadata (attrs aside)."""
    np.testing.assert_array_equal(a["responses"].values, b["responses"].values)
    for coord in ("item", "model", "item_id", "model_id", "item_group", "family", "owner"):
        if coord not in a.coords and coord not in b.coords:
            continue
        np.testing.assert_array_equal(a[coord].values.astype(str), b[coord].values.astype(str), err_msg=coord)


# ----------------------------------------------------------------------------- data model
def test_layout(ds):
    assert ds["responses"].dims == ("item", "model")
    assert ds["responses"].dtype == np.int8
    assert ds["responses"].attrs["missing_code"] == MISSING == -1
    assert ds["responses"].sel(item="q1", model="GPT-4o").item() == MISSING
    assert ds["responses"].sel(item="q2", model="GPT-4o").item() == 1
    assert list(ds["item_id"].values) == ITEMS and list(ds["model_id"].values) == MODELS
    assert list(ds["family"].values) == ["Llama", "Qwen", OTHER, "Phi"]
    assert list(ds["owner"].values) == ["meta-llama", "Qwen", UNKNOWN_OWNER, "microsoft"]
    assert set(ds["item_group"].values) == {"all"}
    assert ds.attrs["name"] == "toy" and "source" not in ds.attrs
    assert observed_mask(ds).sum() == 10 and observed_mask(ds).dtype == bool


def test_defaults_and_missing_spellings():
    m = np.array([[1, None, 0], [pd.NA, 1, 0]], dtype=object)
    out = make_responses(m)
    assert list(out["item"].values) == ["0", "1"] and list(out["model"].values) == ["0", "1", "2"]
    assert (out["responses"].values == [[1, -1, 0], [-1, 1, 0]]).all()
    int8 = make_responses(np.array([[1, -1], [0, 1]], dtype=np.int8))
    assert int8["responses"].values[0, 1] == MISSING


def test_explicit_metadata_and_posterior_alignment(ds):
    out = make_responses(MATRIX, item_id=ITEMS, model_id=MODELS, item_group=["a", "a", "b"], family="X", owner="o")
    assert list(out["item_group"].values) == ["a", "a", "b"] and set(out["family"].values) == {"X"}
    post = xr.DataArray(np.arange(4.0), coords={"model": MODELS[::-1]}, dims="model")
    aligned = post.sel(model=ds["model"])
    assert aligned.sel(model="GPT-4o").item() == 1.0


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(2, 6), st.integers(2, 6)), elements=st.sampled_from([0, 1, np.nan])))
def test_coding_property(m):
    """Any 0/1/NaN matrix: either a DataError about an empty row/column, or an exact int8 recoding."""
    empty = np.isnan(m).all(axis=0).any() or np.isnan(m).all(axis=1).any()
    if empty:
        with pytest.raises(DataError, match="has no observed responses"):
            make_responses(m)
        return
    y = make_responses(m)["responses"].values
    np.testing.assert_array_equal(y, np.where(np.isnan(m), MISSING, m).astype(np.int8))
    np.testing.assert_array_equal(make_responses(y)["responses"].values, y)  # int8 input round-trips


def test_summarize(ds):
    s = summarize(ds)
    assert (s["n_items"], s["n_models"], s["n_observed"]) == (3, 4, 10)
    assert s["missing_fraction"] == pytest.approx(2 / 12)
    assert s["mean_accuracy"] == pytest.approx(np.nanmean(MATRIX))


# ----------------------------------------------------------------------------- bad input
def test_non_binary_value():
    m = MATRIX.copy()
    m[2, 2] = 2
    # an integer code reads as a multiple-choice answer: the answer key is the fix named first
    with pytest.raises(DataError, match=r"other than 0, 1 or missing \(found 2 at item 'q3', model 'GPT-4o'\); they "
                                        r"look like multiple-choice answers: pass --key KEY\.csv .*; otherwise recode"):
        make_responses(m, item_id=ITEMS, model_id=MODELS)
    m = MATRIX.astype(float)
    m[2, 2] = 0.5  # partial credit: a threshold, not a key
    with pytest.raises(DataError, match=r"\(found 0\.5 .*\); recode to 0/1 and leave missing cells empty, or pass "
                                        r"--binarize T"):
        make_responses(m, item_id=ITEMS, model_id=MODELS)


def test_non_numeric_and_int_minus_one():
    with pytest.raises(DataError, match=r"non-numeric value \(found 'yes'"):
        make_responses(np.array([["yes", "0"], ["1", "0"]], dtype=object))
    with pytest.raises(DataError, match=r"found -1 .*only in int8"):
        make_responses(np.array([[1, -1], [0, 1]], dtype=np.int64))


def test_empty():
    with pytest.raises(DataError, match="matrix is empty"):
        make_responses(np.zeros((0, 3)))


def test_one_row():
    with pytest.raises(DataError, match="only one item"):
        make_responses([[0, 1, 1]])


def test_one_column():
    with pytest.raises(DataError, match="only one model"):
        make_responses([[0], [1], [1]])


def test_three_dimensional():
    with pytest.raises(DataError, match=r"must be a 2-D items x models matrix, got 3 dimension"):
        make_responses(np.zeros((2, 3, 4)))


def test_duplicate_item_id():
    with pytest.raises(DataError, match=r"duplicate item id 'q1' \(repeated at position 2\)"):
        make_responses(MATRIX, item_id=["q1", "q2", "q1"])


def test_duplicate_model_id():
    with pytest.raises(DataError, match="duplicate model id 'a'"):
        make_responses(MATRIX, model_id=["a", "b", "a", "c"])


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"item_id": ["a", "b"]}, "item_id has 2 entries but the matrix has 3 items"),
        ({"model_id": list("abcde")}, "model_id has 5 entries but the matrix has 4 models"),
        ({"item_group": ["g"] * 4}, "item_group has 4 entries but the matrix has 3 items"),
        ({"family": ["Llama"]}, "family has 1 entries but the matrix has 4 models"),
        ({"owner": ["x"] * 3}, "owner has 3 entries but the matrix has 4 models"),
    ],
)
def test_wrong_length_metadata(kwargs, pattern):
    with pytest.raises(DataError, match=pattern):
        make_responses(MATRIX, **kwargs)


def test_blank_id():
    with pytest.raises(DataError, match="item_id has a missing or blank id at position 1"):
        make_responses(MATRIX, item_id=["a", "  ", "c"])
    with pytest.raises(DataError, match="model_id has a missing or blank id at position 0"):
        make_responses(MATRIX, model_id=[None, "b", "c", "d"])


def test_no_observed_model():
    m = MATRIX.copy()
    m[:, 1] = np.nan
    with pytest.raises(DataError, match=r"model 'Qwen/Qwen2-7B' has no observed responses; drop it"):
        make_responses(m, item_id=ITEMS, model_id=MODELS)
    kept = make_responses(m, item_id=ITEMS, model_id=MODELS, drop_empty=True)
    assert "Qwen/Qwen2-7B" not in kept["model"].values and kept.attrs["n_dropped_models"] == 1


def test_no_observed_item():
    m = MATRIX.copy()
    m[1, :] = np.nan
    with pytest.raises(DataError, match=r"item 'q2' has no observed responses; drop it"):
        make_responses(m, item_id=ITEMS, model_id=MODELS)


def test_unknown_suffix(tmp_path):
    f = tmp_path / "data.xlsx"
    f.write_text("x")
    with pytest.raises(DataError, match=r"unsupported file type '\.xlsx'.*supported:"):
        load(f)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        load(tmp_path / "absent.csv")
    with pytest.raises(DataError, match="no such file"):
        read_wide_csv(tmp_path / "absent.csv")


def test_corrupt_csv(tmp_path):
    f = tmp_path / "garbage.csv"
    f.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(DataError, match="garbage.csv"):
        load(f)
    g = tmp_path / "ragged.csv"
    g.write_text("a,b\n1,0\n1,0,1,1\n")
    with pytest.raises(DataError, match=r"cannot read .*ragged\.csv"):
        load(g)


def test_corrupt_npz(tmp_path):
    f = tmp_path / "broken.npz"
    f.write_bytes(b"PK\x03\x04 not really a zip archive")
    with pytest.raises(DataError, match=r"cannot read .*broken\.npz"):
        load(f)


def test_pickled_npz(tmp_path):
    f = tmp_path / "pickled.npz"
    np.savez(f, responses=MATRIX, model_id=np.array(MODELS, dtype=object))
    with pytest.raises(DataError, match="pickled arrays are refused; save string arrays as fixed-width unicode"):
        load(f)


def test_bad_values_in_file_name_the_file(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text(",GPT-4o,Llama-3\n0,1,2\n1,0,1\n")
    with pytest.raises(DataError, match=r"bad\.csv: responses contain values other than 0, 1"):
        load(f)


# ----------------------------------------------------------------------------- readers
def test_wide_items_by_models(tmp_path, ds):
    f = tmp_path / "wide.csv"
    f.write_text(",meta-llama/Llama-3-8B,Qwen/Qwen2-7B,GPT-4o,microsoft/phi-2\nq1,1,0,,1\nq2,0,1,1,1\nq3,1.0,,0.0,0\n")
    out = read_wide_csv(f)
    assert_same(out, ds)
    assert out.attrs["source"] == str(f) and out.attrs["name"] == "wide"


def test_wide_models_by_items(tmp_path, ds):
    f = tmp_path / "wide.csv"
    pd.DataFrame(MATRIX.T, index=pd.Index(MODELS, name="model"), columns=ITEMS).to_csv(f)
    assert_same(load(f), ds)


def test_wide_psychometric_and_override(tmp_path):
    f = tmp_path / "lsat_like.csv"
    f.write_text("Q1,Q2,Q3\n1,0,1\n0,0,1\n1,1,1\n1,0,0\n")
    with pytest.warns(OrientationWarning, match=r"lsat_like\.csv: read as rows = models \(4 models x 3 items\), a "
                                                r"guess: .*pass --orientation items-rows"):
        persons = read_wide_csv(f)  # rule f: rows are persons
    assert dict(persons.sizes) == {"item": 3, "model": 4}
    assert list(persons["model"].values) == ["0", "1", "2", "3"]
    assert persons.attrs["orientation"] == "models-rows" and persons.attrs["orientation_basis"].startswith("guessed")
    flipped = read_wide_csv(f, orientation="items-rows")
    assert flipped.attrs["orientation"] == "items-rows"
    np.testing.assert_array_equal(read_wide_csv(f, orientation="items_by_models")["responses"].values,
                                  flipped["responses"].values)  # the earlier spelling
    assert dict(flipped.sizes) == {"item": 4, "model": 3}
    np.testing.assert_array_equal(flipped["responses"].values, persons["responses"].values.T)
    with pytest.raises(DataError, match="orientation 'sideways' is not one of"):
        read_wide_csv(f, orientation="sideways")


def test_wide_id_column_option(tmp_path):
    f = tmp_path / "named.tsv"
    f.write_text("name\tQ1\tQ2\nann\t1\t0\nbob\t0\t1\n")
    out = read_wide_csv(f, id_column="name", orientation="models-rows")
    assert list(out["model"].values) == ["ann", "bob"] and list(out["item"].values) == ["Q1", "Q2"]
    with pytest.raises(DataError, match="id_column 'nope' is not a column"):
        read_wide_csv(f, id_column="nope")
    with pytest.raises(DataError, match="non-numeric value"):
        read_wide_csv(f, orientation="models-rows")  # without the option, 'ann' is a cell


def test_long_csv(tmp_path, ds):
    cells = [(m, i, MATRIX[k, j]) for j, m in enumerate(MODELS) for k, i in enumerate(ITEMS)]
    rows = [row for row in cells if not np.isnan(row[2])]
    df = pd.DataFrame(rows, columns=["model", "item", "correct"])
    f = tmp_path / "long.csv"
    df.sample(frac=1, random_state=0).to_csv(f, index=False)
    out = load(f)
    assert_same(out.sel(item=ITEMS, model=MODELS), ds)
    g = tmp_path / "renamed.csv"
    df.rename(columns={"model": "llm", "correct": "y"}).to_csv(g, index=False)
    assert_same(load(g, model="llm", correct="y").sel(item=ITEMS, model=MODELS), ds)
    with pytest.raises(DataError, match=r"lacks column\(s\) \['correct'\]"):
        read_long(g, model="llm")


def test_long_parquet_with_metadata(tmp_path, ds):
    rows = [(m, i, MATRIX[k, j], f"g{k % 2}") for j, m in enumerate(MODELS) for k, i in enumerate(ITEMS)]
    df = pd.DataFrame(rows, columns=["model", "item", "correct", "item_group"])
    f = tmp_path / "long.parquet"
    df.to_parquet(f)
    out = load(f)
    assert_same(out.drop_vars("item_group"), ds.drop_vars("item_group"))
    assert list(out["item_group"].values) == ["g0", "g1", "g0"]
    df.loc[0, "item_group"] = "other"
    df.to_parquet(f)
    with pytest.raises(DataError, match="column 'item_group' varies within item 'q1'"):
        load(f)


def test_long_duplicates(tmp_path):
    f = tmp_path / "dup.csv"
    f.write_text("model,item,correct\na,x,1\na,y,0\nb,x,1\nb,y,1\na,x,0\n")
    with pytest.raises(DataError, match="duplicate rows for model 'a', item 'x'"):
        load(f)


def test_nt_npz(tmp_path, ds):
    f = tmp_path / "nt.npz"
    y = np.where(np.isnan(MATRIX), -1, MATRIX).astype(np.int8)
    np.savez(f, responses=y, model_id=np.array(MODELS), item_id=np.array(ITEMS), family=np.array(ds["family"].values))
    assert_same(read_nt_npz(f), ds)
    np.savez(tmp_path / "nan.npz", responses=MATRIX, model_id=np.array(MODELS), item_id=np.array(ITEMS))
    assert_same(load(tmp_path / "nan.npz"), ds)


def test_nt_dir(tmp_path, ds):
    d = tmp_path / "nt"
    d.mkdir()
    np.save(d / "responses.npy", MATRIX)
    pd.DataFrame({"model_id": MODELS, "owner": ["a", "b", "c", "d"]}).to_csv(d / "models.csv", index=False)
    pd.DataFrame({"item_id": ITEMS, "item_group": ["x", "y", "x"]}).to_csv(d / "items.csv", index=False)
    out = load(d)
    assert_same(out.drop_vars(["owner", "item_group"]), ds.drop_vars(["owner", "item_group"]))
    assert list(out["owner"].values) == ["a", "b", "c", "d"] and list(out["item_group"].values) == ["x", "y", "x"]
    (d / "models.csv").unlink()
    with pytest.raises(DataError, match="lacks models.csv"):
        read_nt_dir(d)


def test_from_dataframe(ds):
    df = pd.DataFrame(MATRIX, index=ITEMS, columns=MODELS)  # unnamed index, model-like columns
    assert_same(from_dataframe(df), ds)
    by_model = pd.DataFrame(MATRIX.T, index=pd.Index(MODELS, name="Model"), columns=ITEMS).astype("Float64")
    assert_same(from_dataframe(by_model), ds)
    assert_same(from_dataframe(by_model.reset_index()), ds)  # id column named like 'model'
    with pytest.raises(DataError, match="names models but orientation='items-rows'"):
        from_dataframe(by_model, orientation="items-rows")


def test_netcdf_round_trip(tmp_path, ds):
    f = tmp_path / "saved.nc"
    assert save_responses(ds, f) == f
    back = load(f)
    assert_same(back, ds)
    assert back["responses"].dtype == np.int8 and back.attrs["name"] == "toy"
    assert not list(tmp_path.glob("*.tmp"))
    assert_same(validate_responses(ds.transpose("model", "item")), ds)
    with pytest.raises(DataError, match="no 'responses' variable"):
        validate_responses(xr.Dataset())
    xr.Dataset({"a": ("x", [1, 2])}).to_netcdf(tmp_path / "other.nc", engine="h5netcdf")
    with pytest.raises(DataError, match=r"other\.nc: not a response Dataset"):
        load(tmp_path / "other.nc")


# ----------------------------------------------------------------------------- families
@pytest.mark.parametrize(
    ("model_id", "family"),
    [
        ("Qwen/Qwen2.5-7B-Instruct", "Qwen"),
        ("someone/my-QWEN-tune", "Qwen"),
        ("meta-llama/Meta-Llama-3-8B", "Llama"),
        ("google/gemma-2-9b-it", "Gemma"),
        ("mistralai/Mistral-7B-v0.1", "Mistral/Mixtral"),
        ("mistralai/Mixtral-8x7B-v0.1", "Mistral/Mixtral"),
        ("microsoft/Phi-3-mini-4k-instruct", "Phi"),
        ("phi-2", "Phi"),
        ("x/phi3_medium", "Phi"),
        ("cognitivecomputations/dolphin-2.9", OTHER),
        ("someone/Llama-qwen-merge", AMBIGUOUS),
        ("GPT-4o", OTHER),
        ("Gemini-Pro", OTHER),
    ],
)
def test_derive_family(model_id, family):
    assert derive_family([model_id])[0] == family


def test_derive_owner():
    owners = derive_owner(["meta-llama/Llama-3-8B", "GPT-4o", "org/sub/name", "/odd"])
    assert list(owners) == ["meta-llama", UNKNOWN_OWNER, "org", UNKNOWN_OWNER]
    assert derive_family(np.array([["phi-2", "a"], ["b", "qwen"]])).shape == (2, 2)


# ----------------------------------------------------------------------------- embedded data
def test_list_datasets():
    table = list_datasets()
    assert list(table.columns) == ["name", "items", "models", "description", "licence"]
    assert set(table["name"]) == {"lsat6", "lsat7", "chembench"} == set(DATASETS)


@pytest.mark.parametrize("name", list(DATASETS))
def test_embedded_shapes(name):
    out = load_dataset(name)
    info = DATASETS[name]
    assert dict(out.sizes) == {"item": info.n_items, "model": info.n_models}
    assert set(np.unique(out["responses"].values)) <= {0, 1}
    assert out.attrs["name"] == name


def test_lsat6():
    out = load("lsat6")
    assert dict(out.sizes) == {"item": 5, "model": 1000}
    assert list(out["item"].values) == ["Q1", "Q2", "Q3", "Q4", "Q5"]
    assert out["model"].values[0] == "p0001" and out["model"].values[-1] == "p1000"
    assert out["responses"].sel(item="Q1").mean().item() == pytest.approx(0.924)


def test_chembench():
    out = load_dataset("chembench")
    assert dict(out.sizes) == {"item": 2854, "model": 22}
    assert out["item"].values[0] == "chembench_0" and out["item"].values[-1] == "chembench_2853"
    assert set(out["owner"].values) == {UNKNOWN_OWNER}
    fam = dict(zip(out["model"].values, out["family"].values, strict=True))
    assert fam["Llama-3.1-70B-Instruct"] == "Llama" and fam["Phi-3-Medium-4k-Instruct"] == "Phi"
    assert fam["Mistral-8x7b-Instruct"] == "Mistral/Mixtral" and fam["GPT-4o"] == OTHER


def test_unknown_dataset():
    with pytest.raises(DataError, match="unknown dataset 'lsat9'; available datasets: lsat6, lsat7, chembench"):
        load_dataset("lsat9")
    with pytest.raises(DataError, match="no such file or embedded dataset: 'lsat9'.*lsat6"):
        load("lsat9")


def test_item_headers_that_happen_to_name_a_family_do_not_flip_a_labelled_table(tmp_path):
    """Open LLM Leaderboard layout: unnamed first column of owner/name model ids, MMLU item headers
    such as "philosophy.12" (which contains "phi"). The rows that look like model ids hold the models."""
    from bayesirt.data import load

    path = tmp_path / "mmlu.csv"
    path.write_text('"","philosophy.12","high_school_mathematics.3","gemma_facts.1"\n'
                    '"org/model-a",0,1,1\n"org/model-b",1,1,0\n"other/model-c",1,0,0\n')
    ds = load(path)
    assert dict(ds.sizes) == {"item": 3, "model": 3}
    assert list(ds["model"].values) == ["org/model-a", "org/model-b", "other/model-c"]
    # the ChemBench layout (item index rows, model-name columns) still reads items x models
    chem = tmp_path / "chem.csv"
    chem.write_text('"","GPT-4o","Llama-3.1-70B-Instruct"\n0,1,0\n1,1,1\n')
    assert list(load(chem)["model"].values) == ["GPT-4o", "Llama-3.1-70B-Instruct"]
