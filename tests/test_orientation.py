"""The layout of matrix files (rows = models or rows = items): `--orientation`, the warning when `auto`
guesses, bare NPY and NPZ matrices, and the layout in the reading record."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from bayesirt.cli.main import main
from bayesirt.data import load
from bayesirt.data.layout import OrientationWarning
from bayesirt.data.reading import reading_record
from bayesirt.errors import ConfigError, DataError
from bayesirt.jobs.analysis import load_analysis

N_ITEMS, N_PERSONS = 80, 300


@pytest.fixture(scope="module")
def human_test() -> np.ndarray:
    """An 80-item x 300-person 0/1 matrix (rows = items) drawn from a Rasch model, seed 7."""
    rng = np.random.default_rng(7)
    ability, difficulty = rng.normal(size=N_PERSONS), rng.normal(size=N_ITEMS)
    p = 1 / (1 + np.exp(-(ability[None, :] - difficulty[:, None])))
    return (rng.random((N_ITEMS, N_PERSONS)) < p).astype(int)


def _write_generic(path, matrix) -> None:
    """A wide CSV with generic ids: an unnamed row-id column 0..n-1 and column headers 0..m-1."""
    pd.DataFrame(matrix).to_csv(path)


def test_items_as_rows_with_generic_ids_is_read_as_the_user_says(tmp_path, human_test):
    f = tmp_path / "human.csv"
    _write_generic(f, human_test)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a layout given is obeyed without a warning
        ds = load(f, orientation="items-rows")
    assert dict(ds.sizes) == {"item": N_ITEMS, "model": N_PERSONS}
    np.testing.assert_array_equal(ds["responses"].values, human_test)
    assert reading_record(ds)["orientation"] == {"layout": "items-rows", "basis": "given (orientation='items-rows')"}


def test_auto_warns_that_it_guessed_naming_the_file_the_guess_the_reason_and_the_flag(tmp_path, human_test):
    f = tmp_path / "human.csv"
    _write_generic(f, human_test)
    with pytest.warns(OrientationWarning) as seen:
        ds = load(f)
    text = str(seen[0].message)
    assert str(f) in text
    assert "read as rows = models (80 models x 300 items), a guess" in text
    assert "psychometric convention" in text and "--orientation items-rows" in text
    assert dict(ds.sizes) == {"item": N_PERSONS, "model": N_ITEMS}  # today's detection, unchanged
    assert reading_record(ds)["orientation"]["layout"] == "models-rows"
    assert reading_record(ds)["orientation"]["basis"].startswith("guessed")


def test_models_rows_is_obeyed_exactly(tmp_path, human_test):
    f = tmp_path / "persons.csv"
    _write_generic(f, human_test.T)  # 300 person rows x 80 item columns
    ds = load(f, orientation="models-rows")
    assert dict(ds.sizes) == {"item": N_ITEMS, "model": N_PERSONS}
    np.testing.assert_array_equal(ds["responses"].values, human_test)


def test_clear_evidence_gives_no_warning(tmp_path):
    f = tmp_path / "board.csv"
    f.write_text(",meta-llama/Llama-3-8B,Qwen/Qwen2-7B,openai/gpt-4o\nq1,1,0,1\nq2,0,1,1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = load(f)
    assert ds.attrs["orientation"] == "items-rows" and "look like model ids (3 of 3" in ds.attrs["orientation_basis"]
    g = tmp_path / "labelled.csv"
    g.write_text("item,a,b\nq1,1,0\nq2,0,1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load(g).attrs["orientation_basis"] == "the row-id header 'item'"


def test_a_given_layout_against_the_evidence_is_obeyed_with_a_warning(tmp_path):
    f = tmp_path / "board.csv"
    f.write_text(",meta-llama/Llama-3-8B,Qwen/Qwen2-7B,openai/gpt-4o\nq1,1,0,1\nq2,0,1,1\n")
    with pytest.warns(OrientationWarning, match=r"board\.csv: read as rows = models \(2 models x 3 items\) as "
                                                r"--orientation models-rows says, although the column headers look "
                                                r"like model ids \(3 of 3, e\.g\. 'meta-llama/Llama-3-8B'\)"):
        ds = load(f, orientation="models-rows")
    assert list(ds["model"].values) == ["q1", "q2"]


def test_a_given_layout_against_the_row_header_is_refused(tmp_path):
    f = tmp_path / "named.csv"
    f.write_text("model,q1,q2\na,1,0\nb,0,1\n")
    with pytest.raises(DataError, match=r"named\.csv: the row-id column 'model' names models but "
                                        r"orientation='items-rows'"):
        load(f, orientation="items-rows")


def test_orientation_does_not_apply_to_long_files(tmp_path):
    f = tmp_path / "long.csv"
    f.write_text("model,item,correct\na,x,1\na,y,0\nb,x,0\nb,y,1\n")
    assert load(f, orientation="auto").sizes["item"] == 2  # the default is ignored
    with pytest.raises(DataError, match=r"option\(s\) orientation do not apply to .*long\.csv, a long table"):
        load(f, orientation="items-rows")


# ----------------------------------------------------------------------------------- NumPy matrices
# 3 items x 4 models; rows = items; -1 and NaN are missing
Y = np.array([[1, 0, -1, 1], [0, 1, 1, 1], [1, -1, 0, 0]])
EXPECTED = np.where(Y == -1, -1, Y).astype(np.int8)


def test_bare_npy_is_read_rows_items_with_a_warning(tmp_path):
    f = tmp_path / "matrix.npy"
    np.save(f, Y)
    with pytest.warns(OrientationWarning, match=r"matrix\.npy: read as rows = items \(3 items x 4 models\), a guess: "
                                                r"the matrix has no item_id or model_id; .*--orientation models-rows"):
        ds = load(f)
    np.testing.assert_array_equal(ds["responses"].values, EXPECTED)
    assert list(ds["item"].values) == ["0", "1", "2"] and list(ds["model"].values) == ["0", "1", "2", "3"]
    np.save(f, np.where(Y == -1, np.nan, Y.astype(float)))  # NaN for missing, floats
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(load(f, orientation="items-rows")["responses"].values, EXPECTED)
    np.save(f, Y.T)
    flipped = load(f, orientation="models-rows")
    np.testing.assert_array_equal(flipped["responses"].values, EXPECTED)
    assert reading_record(flipped)["orientation"]["layout"] == "models-rows"


def test_npz_ids_are_optional_and_decide_the_layout(tmp_path):
    f = tmp_path / "bare.npz"
    np.savez(f, responses=Y)
    with pytest.warns(OrientationWarning, match="no item_id or model_id"):
        np.testing.assert_array_equal(load(f)["responses"].values, EXPECTED)
    g = tmp_path / "models_rows.npz"
    np.savez(g, responses=Y.T, model_id=np.array(["a", "b", "c", "d"]))  # 4 rows, 4 model ids: rows are models
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = load(g)
    np.testing.assert_array_equal(ds["responses"].values, EXPECTED)
    assert list(ds["model"].values) == ["a", "b", "c", "d"]
    assert reading_record(ds)["orientation"] == {"layout": "models-rows",
                                                 "basis": "the lengths of the ids (model_id has 4)"}
    with pytest.raises(DataError, match=r"orientation='items-rows' contradicts the ids of the 4 x 3 matrix "
                                        r"\(model_id has 4\); pass --orientation models-rows"):
        load(g, orientation="items-rows")


def test_square_npz_with_ids_warns(tmp_path):
    f = tmp_path / "square.npz"
    np.savez(f, responses=np.array([[1, 0], [0, 1]]), model_id=np.array(["a", "b"]))
    with pytest.warns(OrientationWarning, match=r"square \(2 x 2\), so its ids fit either way"):
        assert list(load(f)["model"].values) == ["a", "b"]


def test_npz_without_responses_names_the_keys(tmp_path):
    f = tmp_path / "wrong.npz"
    np.savez(f, matrix=Y)
    with pytest.raises(DataError, match=r"wrong\.npz: NPZ lacks the array 'responses' \(has \['matrix'\]\); save the "
                                        r"matrix as responses=, with optional item_id, model_id, item_group, testlet, "
                                        r"family, owner"):
        load(f)


def test_unknown_npz_arrays_are_named(tmp_path):
    f = tmp_path / "extra.npz"
    np.savez(f, responses=Y, model_id=np.array(list("abcd")), items=np.array(["x", "y", "z"]))
    with pytest.warns(UserWarning, match=r"arrays \['items'\] ignored"):
        load(f)


# ----------------------------------------------------------------------------- command line, analysis files
def test_cli_orientation_reaches_the_reader_and_the_summary(tmp_path, human_test):
    f = tmp_path / "human.csv"
    _write_generic(f, human_test[:20])  # 20 items x 300 persons
    out = tmp_path / "mml"
    assert main(["mml", str(f), "--model", "rasch", "--orientation", "items-rows", "--out", str(out)]) == 0
    assert len(pd.read_csv(out / "items.csv")) == 20 and len(pd.read_csv(out / "models.csv")) == N_PERSONS
    reading = json.loads((out / "summary.json").read_text())["reading"]
    assert reading["orientation"]["layout"] == "items-rows"
    # a value that is not a choice is refused while the arguments are parsed: exit 2, nothing written
    assert main(["mml", str(f), "--orientation", "sideways", "--out", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()


def test_analysis_files_take_orientation_in_read(tmp_path):
    spec = tmp_path / "a.toml"
    spec.write_text('[analysis]\nkind = "fit"\ndata = "x.csv"\nmodel = "2pl"\nout = "o"\n'
                    '[read]\norientation = "items-rows"\nkey = "key.csv"\n')
    assert load_analysis(spec)["read"] == {"orientation": "items-rows", "key": "key.csv"}
    spec.write_text('[analysis]\nkind = "fit"\ndata = "x.csv"\nmodel = "2pl"\nout = "o"\n'
                    '[read]\norientation = "rows"\n')
    with pytest.raises(ConfigError, match=r"\[read\] The 'orientation' parameter of load must be one of "
                                                   r"\{'auto', 'models-rows', 'items-rows'\}; got 'rows'"):
        load_analysis(spec)


@pytest.mark.slow
def test_readme_data_file_examples_run(tmp_path, human_test, monkeypatch):
    """The commands of the "Data files" block of docs/guide/data.md, on files of the shapes they describe: an items-as-rows
    human test with generic ids, and a persons-as-rows NPY of options 0-4 with its key (fit as MAP, test time)."""
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "guide" / "data.md").read_text()
    block = text.split("Data files, read by every command that takes DATA", 1)[1].split("```sh", 1)[1]
    examples = [line.split("  #", 1)[0].split()[1:] for line in block.split("```", 1)[0].splitlines() if line.strip()]
    assert [e[0] for e in examples] == ["mml", "fit"]
    monkeypatch.chdir(tmp_path)
    _write_generic(tmp_path / "human_test.csv", human_test[:20])
    rng = np.random.default_rng(5)
    key = rng.integers(0, 5, size=20)
    np.save(tmp_path / "answers.npy", np.where(human_test[:20].T == 1, key, (key + 1) % 5))  # persons x items
    pd.DataFrame({"item_id": [str(i) for i in range(20)], "key": key}).to_csv(tmp_path / "key.csv", index=False)
    for args in examples:
        assert main([*args, "--no-progress", *(["--method", "map"] if args[0] == "fit" else [])]) == 0
    for out in ("outputs/human", "outputs/scored"):
        reading = json.loads((tmp_path / out / "summary.json").read_text())["reading"]
        assert reading["orientation"]["basis"].startswith("given")
    assert len(pd.read_csv(tmp_path / "outputs/human/items.csv")) == 20
    assert json.loads((tmp_path / "outputs/scored/summary.json").read_text())["reading"]["answer_key"] == "key.csv"


def test_matrix_options_do_not_apply_to_harness_output():
    from pathlib import Path

    folder = Path(__file__).parent / "fixtures" / "harness" / "lmeval" / "clean"
    with pytest.raises(DataError, match=r"option\(s\) orientation, key do not apply to .*clean, an evaluation-harness "
                                        r"output \(it takes: .*metric.*\); they are for matrix files: drop them"):
        load(folder, orientation="items-rows", key="key.csv")


def test_a_minority_of_model_like_headers_is_a_guess(tmp_path):
    f = tmp_path / "mixed.csv"
    f.write_text(",q1,q2,q3,unit/7\n0,1,0,1,1\n1,0,1,0,0\n")  # one item header has a slash
    with pytest.warns(OrientationWarning, match=r"mixed\.csv: read as rows = items \(2 items x 4 models\), a guess: "
                                                r"only 1 of 4 column headers look like model ids"):
        ds = load(f)
    assert ds.attrs["orientation"] == "items-rows"  # the auto rule of before, now with its doubt said
