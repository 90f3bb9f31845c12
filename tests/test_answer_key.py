"""`--key KEY.csv`: raw multiple-choice answers scored against an answer key, in every matrix format."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from bayesirt.cli.main import main
from bayesirt.data import load, read_key, score_answers
from bayesirt.data.reading import reading_record
from bayesirt.errors import DataError

# 4 items (rows) x 5 models, options 0-4, one missing answer in q1 and q3
CHOICES = "item,m1,m2,m3,m4,m5\nq1,0,1,2,,0\nq2,3,3,4,3,1\nq3,2,2,,2,0\nq4,4,0,1,4,4\n"
KEY = "item_id,key\nq1,0\nq2,3\nq3,1\nq4,4\n"
# scored by hand: 1 where the answer is the key, 0 otherwise, -1 (missing) stays missing
SCORED = np.array([[1, 0, 0, -1, 1],
                   [1, 1, 0, 1, 0],
                   [0, 0, -1, 0, 0],
                   [1, 0, 0, 1, 1]], dtype=np.int8)
ITEMS, MODELS = ["q1", "q2", "q3", "q4"], ["m1", "m2", "m3", "m4", "m5"]
LETTERS = dict(zip("01234", "ABCDE", strict=True))


def _letters(text: str) -> str:
    """The same table with the options written A-E."""
    rows = [line.split(",") for line in text.strip().split("\n")]
    return "\n".join(",".join([r[0], *(LETTERS.get(c, c) for c in r[1:])]) for r in rows) + "\n"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "choices.csv").write_text(CHOICES)
    (tmp_path / "key.csv").write_text(KEY)
    return tmp_path / "choices.csv", tmp_path / "key.csv"


def test_wide_choices_scored_as_by_hand(files):
    data, key = files
    ds = load(data, key=key)
    np.testing.assert_array_equal(ds["responses"].values, SCORED)
    assert list(ds["item"].values) == ITEMS and list(ds["model"].values) == MODELS
    assert reading_record(ds)["answer_key"] == str(key)


def test_letters_any_case(tmp_path):
    (tmp_path / "c.csv").write_text(_letters(CHOICES).lower())  # answers in lower case
    (tmp_path / "k.csv").write_text(_letters(KEY).replace("item_id,key", "item,answer"))  # the other headers
    assert read_key(tmp_path / "k.csv") == {"q1": "A", "q2": "D", "q3": "B", "q4": "E"}
    np.testing.assert_array_equal(load(tmp_path / "c.csv", key=tmp_path / "k.csv")["responses"].values, SCORED)


def test_models_as_rows_and_npy_and_long(tmp_path, files):
    _, key = files
    table = pd.read_csv(files[0], index_col=0, dtype=str, keep_default_na=False)
    wide = tmp_path / "by_model.csv"
    table.T.rename_axis("model").to_csv(wide)  # rows = models
    np.testing.assert_array_equal(load(wide, key=key)["responses"].values, SCORED)
    npy = tmp_path / "choices.npy"
    np.save(npy, table.replace("", "-1").to_numpy(dtype=int))  # -1 is missing in NumPy matrices
    (tmp_path / "npy_key.csv").write_text("item_id,key\n0,0\n1,3\n2,1\n3,4\n")  # KEY with the items numbered
    ds = load(npy, key=tmp_path / "npy_key.csv", orientation="items-rows")  # a bare matrix: items are 0..3
    np.testing.assert_array_equal(ds["responses"].values, SCORED)
    long = tmp_path / "long.csv"
    rows = [(m, i, table.loc[i, m]) for m in MODELS for i in ITEMS if table.loc[i, m] != ""]
    pd.DataFrame(rows, columns=["model", "item", "correct"]).to_csv(long, index=False)
    out = load(long, key=key)
    np.testing.assert_array_equal(out["responses"].sel(item=ITEMS, model=MODELS).values, SCORED)


@pytest.mark.parametrize(("data", "key", "message"), [
    (CHOICES, KEY + "q5,2\n", r"answer key .*key\.csv: 1 item\(s\) are not items of .*choices\.csv \(q5\); remove "
                              r"them from the key, or check the item ids and --orientation"),
    (CHOICES, KEY.replace("q4,4\n", ""), r"answer key .*key\.csv has no key for 1 item\(s\) of .*choices\.csv \(q4\); "
                                         r"add a row item_id,key for every item"),
    (CHOICES.replace("q2,3,3,4", "q2,3,2.5,4"), KEY, r"choices\.csv: the answer '2\.5' of model 'm2' to item 'q2' is "
                                                     r"not an answer option \(key .*key\.csv\); write each answer as a "
                                                     r"non-negative integer"),
    (CHOICES.replace("q4,4,0", "q4,E,0"), KEY, r"the answer 'E' of model 'm1' to item 'q4' is not written like its "
                                               r"key \(numbers vs letters\)"),
    (CHOICES.replace("q1,0,1", "q1,-1,1"), KEY, r"the answer '-1' of model 'm1' to item 'q1' is not an answer option"),
    (CHOICES, "item_id,correct_option\nq1,0\n", r"answer key .*key\.csv needs the columns item_id and key \(has "
                                                r"\['item_id', 'correct_option'\]\)"),
    (CHOICES, KEY.replace("q3,1", "q3,"), r"answer key .*key\.csv: the key of item 'q3' is '', not an option"),
    (CHOICES, KEY + "q1,2\n", r"answer key .*key\.csv: item id 'q1' is blank or repeated"),
])
def test_bad_keys_and_answers_are_one_line_data_errors(tmp_path, data, key, message):
    (tmp_path / "choices.csv").write_text(data)
    (tmp_path / "key.csv").write_text(key)
    with pytest.raises(DataError, match=message) as err:
        load(tmp_path / "choices.csv", key=tmp_path / "key.csv")
    assert "\n" not in str(err.value)


def test_key_file_must_exist_and_not_meet_binarize(files, tmp_path):
    data, key = files
    with pytest.raises(DataError, match=r"no answer key at .*nope\.csv; give a CSV with columns item_id,key"):
        load(data, key=tmp_path / "nope.csv")
    with pytest.raises(DataError, match=r"key and binarize do not go together for .*choices\.csv"):
        load(data, key=key, binarize=0.5)


def test_cli_key_scores_and_is_recorded(tmp_path):
    """Simulated answers of 300 persons to 10 five-option items (seed 3): correct with the Rasch
    probability, else a uniformly drawn wrong option; scored with --key they equal the 0/1 truth."""
    rng = np.random.default_rng(3)
    key = rng.integers(0, 5, size=10)
    theta, b = rng.normal(size=300), np.linspace(-1.5, 1.5, 10)
    right = rng.random((10, 300)) < 1 / (1 + np.exp(-(theta[None, :] - b[:, None])))
    wrong = (key[:, None] + rng.integers(1, 5, size=(10, 300))) % 5
    answers = np.where(right, key[:, None], wrong)
    items = [f"item{k}" for k in range(10)]
    pd.DataFrame(answers, index=pd.Index(items, name="item"), columns=[f"p{j}" for j in range(300)]).to_csv(
        tmp_path / "answers.csv")
    pd.DataFrame({"item_id": items, "key": key}).to_csv(tmp_path / "key.csv", index=False)
    ds = load(tmp_path / "answers.csv", key=tmp_path / "key.csv")
    np.testing.assert_array_equal(ds["responses"].values, right.astype(np.int8))
    out = tmp_path / "mml"
    assert main(["mml", str(tmp_path / "answers.csv"), "--model", "rasch", "--key", str(tmp_path / "key.csv"),
                 "--out", str(out)]) == 0
    assert json.loads((out / "summary.json").read_text())["reading"]["answer_key"] == str(tmp_path / "key.csv")
    report = (out / "report.md").read_text()  # the report says how the file was read
    assert f"scored with the key `{tmp_path / 'key.csv'}`" in report
    assert "one row per item (`items-rows`)" in report
    assert main(["mml", str(tmp_path / "answers.csv"), "--out", str(tmp_path / "x")]) == 2  # unscored answers refused


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answers=arrays(np.float64, st.tuples(st.integers(2, 6), st.integers(2, 6)),
                      elements=st.sampled_from([0.0, 1.0, 2.0, 3.0, 4.0, np.nan])),
       key=st.lists(st.integers(0, 4), min_size=6, max_size=6))
def test_scoring_matches_a_numpy_oracle(tmp_path, answers, key):
    """Any answer matrix (rows = items, NaN missing) scores as ``answers == key`` with missing kept."""
    n_items = answers.shape[0]
    key = np.array(key[:n_items])
    (tmp_path / "k.csv").write_text("item_id,key\n" + "".join(f"{i},{k}\n" for i, k in enumerate(key)))
    expected = np.where(np.isnan(answers), -1, answers == key[:, None])
    scored = score_answers(answers, [str(i) for i in range(n_items)], [str(j) for j in range(answers.shape[1])],
                           tmp_path / "k.csv", "the oracle matrix")
    np.testing.assert_array_equal(np.where(np.isnan(scored), -1, scored), expected)
