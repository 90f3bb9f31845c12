"""Read the real matrices in ../shared/data through ``bayesirt.data.load`` (skipped when absent)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from bayesirt.data import load, summarize
from bayesirt.errors import DataError

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


def _file(relative: str) -> Path:
    path = SHARED / relative
    if not path.is_file():
        pytest.skip(f"{path} not available (../shared/data is absent)")
    return path


def test_chembench_file():
    ds = load(_file("llm/chembench_items_by_models.csv"))
    assert dict(ds.sizes) == {"item": 2854, "model": 22}
    assert set(np.unique(ds["responses"].values)) == {0, 1}
    assert "GPT-4o" in ds["model"].values and ds["item"].values[0] == "0"
    embedded = load("chembench")
    np.testing.assert_array_equal(ds["responses"].values, embedded["responses"].values)


def test_bbh_file():
    ds = load(_file("llm/bbh_tracking_shuffled_objects_5_models_by_items.csv"))
    s = summarize(ds)
    assert (s["n_items"], s["n_models"]) == (250, 4030)
    assert s["n_items"] * s["n_models"] - s["n_observed"] == 450
    assert s["mean_accuracy"] == pytest.approx(0.21, abs=0.01)
    families = Counter(ds["family"].values.tolist())
    # NT C.1 unique match: a model matching several patterns is "ambiguous" (18 here, mostly
    # Llama "...-Philos" merges, where the token "Philos" begins with "phi"). The README's
    # "about 718 Llama, 678 Qwen, 226 Gemma, 148 Mistral/Mixtral, 101 Phi" are first-match
    # counts in the order Qwen, Llama, Gemma, Mistral/Mixtral, Phi; unique-match counts are lower.
    assert families == {
        "other": 2159, "Llama": 705, "Qwen": 675, "Gemma": 225, "Mistral/Mixtral": 147, "Phi": 101, "ambiguous": 18,
    }
    assert list(ds["model"].values[ds["owner"].values == "unknown"]) == ["gpt2"]  # the one id without owner/


def test_lsat6_file_matches_embedded():
    ds = load(_file("human/lsat6.csv"))
    assert dict(ds.sizes) == {"item": 5, "model": 1000}
    assert ds["model"].values[0] == "0" and ds["model"].values[-1] == "999"
    np.testing.assert_array_equal(ds["responses"].values, load("lsat6")["responses"].values)


def test_ability_file_with_empty_persons():
    path = _file("human/ability.csv")
    with pytest.raises(DataError, match="has no observed responses.*drop_empty=True"):
        load(path)
    ds = load(path, drop_empty=True)
    assert ds.sizes["item"] == 16 and ds.sizes["model"] == 1525 - ds.attrs["n_dropped_models"]
    assert ds["item"].values[0] == "reason.4" and ds["model"].values[0] == "5"
