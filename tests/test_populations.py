"""Tests of the audit population (NT App. C.1): exclusions, cap, owner-disjoint split, representatives."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bayesirt.data import (
    FAMILIES,
    LINEAGE_TERMS,
    MISSING,
    POPULATION_SEED,
    audit_population,
    make_responses,
)
from bayesirt.errors import ConfigError, DataError

N_ITEMS = 10  # accuracies are multiples of 0.1


def population(models: dict[str, int], *, n_missing: dict[str, int] | None = None, **labels) -> xr.Dataset:
    """Response Dataset of N_ITEMS items; model id -> number correct (first items correct, then wrong,
    the last ``n_missing[id]`` cells missing)."""
    y = np.zeros((N_ITEMS, len(models)), dtype=np.int8)
    for m, (model_id, k) in enumerate(models.items()):
        y[:k, m] = 1
        gone = (n_missing or {}).get(model_id, 0)
        if gone:
            y[N_ITEMS - gone :, m] = MISSING
    return make_responses(y, model_id=list(models), **labels)


def two_families(n_owners: int = 4, *, start: int = 1) -> dict[str, int]:
    """One Qwen and one Llama checkpoint per owner ``o1..``, accuracies 0.2..0.9."""
    out = {}
    for o in range(start, start + n_owners):
        out[f"o{o}/Qwen-{o}"] = 2 + o % 7
        out[f"o{o}/Llama-{o}"] = 9 - o % 7
    return out


def row(pop: pd.DataFrame, model_id: str) -> pd.Series:
    return pop.set_index("model_id").loc[model_id]


# ----------------------------------------------------------------------------- table and exclusions
def test_columns_order_and_accuracy_ignores_missing():
    models = two_families() | {"o1/Qwen-extra": 4}
    pop = audit_population(population(models, n_missing={"o1/Qwen-extra": 2}), min_family_size=1)
    assert list(pop.columns) == ["model_id", "family", "owner", "accuracy", "status", "fold", "representative"]
    assert list(pop["model_id"]) == list(models)
    assert row(pop, "o1/Qwen-extra")["accuracy"] == pytest.approx(4 / 8)
    assert row(pop, "o1/Qwen-1")["accuracy"] == pytest.approx(0.3)
    assert pop["fold"].dtype == np.int64 and pop["representative"].dtype == bool


def test_statuses_in_order():
    models = two_families(6) | {
        "o1/gpt-4": 5,  # no family
        "o2/llama-qwen-mix": 5,  # ambiguous
        "o1/dolphin-dpo": 5,  # no family first, although it would hit the lineage filter
        "o3/Qwen-7B-DPO": 5,  # lineage filter (when on)
        "o4/Llama-LoRA-ABLITERATED": 5,  # lineage filter (case-insensitive)
        "o2/Qwen-b": 5, "o2/Qwen-c": 6, "o2/Qwen-d": 7,  # o2 has 4 Qwen: 2 over owner_cap=2
        "o4/phi-2": 5, "o1/Phi-3-mini": 5,  # 2 Phi < min_family_size=3
    }  # fmt: skip
    pop = audit_population(population(models), owner_cap=2, min_family_size=3, lineage_filter=True)
    status = pop.set_index("model_id")["status"]
    assert status["o1/gpt-4"] == "no family" and status["o1/dolphin-dpo"] == "no family"
    assert status["o2/llama-qwen-mix"] == "ambiguous family"
    assert status["o3/Qwen-7B-DPO"] == status["o4/Llama-LoRA-ABLITERATED"] == "lineage filter"
    o2_qwen = status[[m for m in models if m.startswith("o2/Qwen")]]
    assert (o2_qwen == "retained").sum() == 2 and (o2_qwen == "over owner cap").sum() == 2
    assert status["o4/phi-2"] == status["o1/Phi-3-mini"] == "family below minimum"
    assert (status == "retained").sum() == 13  # 7 Qwen (2 of them o2's), 6 Llama
    assert ((pop["status"] == "retained") == (pop["fold"] >= 0)).all()
    assert not pop.loc[pop["status"] != "retained", "representative"].any()
    without = audit_population(population(models), owner_cap=2, min_family_size=3)
    assert set(without.set_index("model_id").loc[["o3/Qwen-7B-DPO", "o4/Llama-LoRA-ABLITERATED"], "status"]) == {
        "retained"
    }


@pytest.mark.parametrize("term", LINEAGE_TERMS)
def test_every_lineage_term(term):
    models = two_families(5) | {f"o1/Qwen-{term.upper()}-x": 5}
    pop = audit_population(population(models), min_family_size=1, lineage_filter=True)
    assert row(pop, f"o1/Qwen-{term.upper()}-x")["status"] == "lineage filter"
    assert (pop["status"] == "retained").sum() == len(models) - 1


def test_families_argument_and_user_labels():
    models = two_families(4)
    labels = {"family": ["A", "B"] * 4, "owner": ["p", "p", "q", "q", "r", "r", "s", "s"]}
    pop = audit_population(population(models, **labels), families=("A", "B"), min_family_size=1)
    assert (pop["status"] == "retained").all() and set(pop["owner"]) == {"p", "q", "r", "s"}
    by_default = two_families(4) | {"o1/phi-2": 5, "o2/phi-3": 5, "o3/phi-1": 4, "o4/phi-4": 3}
    omitted = audit_population(population(by_default), families=("Qwen", "Llama"), min_family_size=1)
    assert set(omitted.loc[omitted["family"] == "Phi", "status"]) == {"no family"}


def labelled(labels: tuple[str, ...], n_owners: int = 4, **extra) -> xr.Dataset:
    """One model per owner ``o1..`` and label, ids without any NT family pattern, labels supplied."""
    models = {f"o{o}/model-{k}": 2 + (o + k) % 7 for o in range(1, n_owners + 1) for k in range(len(labels))}
    family = [labels[k] for o in range(n_owners) for k in range(len(labels))]
    return population(models, family=family, **extra)


@pytest.mark.parametrize("labels", [("family_0", "family_1", "family_2"), ("qwen", "GPT", "Claude"),
                                    ("DeepSeek", "Qwen", "gpt")])
def test_supplied_labels_are_audited_as_given(labels):
    pop = audit_population(labelled(labels), min_family_size=1)
    assert (pop["status"] == "retained").all()
    assert set(pop["family"]) == set(labels)  # case kept, none renamed
    assert pop.groupby("fold")["family"].nunique().eq(len(labels)).all()


def test_default_skips_other_and_ambiguous_and_small_labels():
    ds = labelled(("qwen", "GPT", "other", "ambiguous", "tiny"))
    family = ds["family"].values.copy()
    family[np.isin(ds["model_id"].values, ["o2/model-4", "o3/model-4", "o4/model-4"])] = "other"  # 1 "tiny" left
    pop = audit_population(ds.assign_coords(family=("model", family)), min_family_size=2)
    status = pop.groupby("family")["status"].agg(set)
    assert status["qwen"] == status["GPT"] == {"retained"}
    assert status["other"] == {"no family"} and status["ambiguous"] == {"ambiguous family"}
    assert status["tiny"] == {"family below minimum"}


def test_explicit_families_restrict_and_unknown_labels_are_named():
    ds = labelled(("qwen", "GPT", "Claude"))
    pop = audit_population(ds, families=["qwen", "Claude"], min_family_size=1)
    assert set(pop.loc[pop["status"] == "retained", "family"]) == {"qwen", "Claude"}
    assert set(pop.loc[pop["family"] == "GPT", "status"]) == {"no family"}
    with pytest.raises(DataError, match=r"^families lists 'Qwen', 'GPT4', which no model of the data has \(family labels "
                                        r"present, with models: 'Claude' \(4\), 'GPT' \(4\), 'qwen' \(4\)\); .*case "
                                        r"matters.*--derive-families"):
        audit_population(ds, families=("Qwen", "GPT4"), min_family_size=1)


def test_too_few_families_lists_every_label_with_its_counts():
    ds = labelled(("family_0", "family_1", "family_2"), n_owners=3)
    with pytest.raises(DataError, match=r"only 0 families left after exclusions \(family labels seen, models in the "
                                        r"data / after the owner cap: family_0 3 / 3, family_1 3 / 3, family_2 3 / 3; "
                                        r"kept: none; .*--min-family-size.*--families.*--derive-families"):
        audit_population(ds)
    with pytest.raises(DataError, match=r"family_0 3 / 3, family_1 3 \(not in families\), family_2 3 / 3; kept: none"):
        audit_population(ds, families=("family_0", "family_2"), min_family_size=4)
    many = labelled(tuple(f"L{k:02d}" for k in range(25)), n_owners=1)
    with pytest.raises(DataError, match=r"L19 1 / 1, and 5 more labels; kept: none"):
        audit_population(many, min_family_size=2)


# ----------------------------------------------------------------------------- owner cap
def caps_population() -> xr.Dataset:
    models = two_families(8) | {f"o1/Qwen-ckpt{k}": k for k in range(8)} | {f"o2/Llama-ckpt{k}": k for k in range(5)}
    return population(models)


def test_cap_keeps_exactly_owner_cap_and_is_reproducible():
    ds = caps_population()
    pop = audit_population(ds, owner_cap=5, min_family_size=1)
    o1_qwen = pop[(pop["owner"] == "o1") & (pop["family"] == "Qwen")]
    assert len(o1_qwen) == 9 and (o1_qwen["status"] == "retained").sum() == 5
    assert (o1_qwen["status"] == "over owner cap").sum() == 4
    o2_llama = pop[(pop["owner"] == "o2") & (pop["family"] == "Llama")]
    assert (o2_llama["status"] == "retained").sum() == 5  # 6 checkpoints -> 1 dropped
    assert (pop["status"] == "over owner cap").sum() == 5
    pd.testing.assert_frame_equal(pop, audit_population(ds, owner_cap=5, min_family_size=1))
    kept = {
        frozenset(p.loc[p["status"] == "over owner cap", "model_id"])
        for p in (audit_population(ds, owner_cap=5, min_family_size=1, seed=s) for s in range(6))
    }
    assert len(kept) > 1  # the choice depends on the seed


def test_cap_of_one_keeps_one_per_owner_family():
    pop = audit_population(caps_population(), owner_cap=1, min_family_size=1)
    retained = pop[pop["status"] == "retained"]
    assert retained.groupby(["owner", "family"]).size().eq(1).all()
    assert retained["representative"].all()


def test_family_below_minimum_drops_whole_family():
    models = two_families(6) | {"o1/phi-2": 5, "o2/phi-3": 6}
    pop = audit_population(population(models), min_family_size=3)
    assert set(pop.loc[pop["family"] == "Phi", "status"]) == {"family below minimum"}
    assert set(pop.loc[pop["family"] != "Phi", "status"]) == {"retained"}
    kept = audit_population(population(models), min_family_size=2)
    assert set(kept["status"]) == {"retained"}


# ----------------------------------------------------------------------------- owner-disjoint split
# Hand example (families Q = Qwen, L = Llama). Retained counts 4, 3, 2, 1 fix the owner order.
#   L accuracies .5 .2 (A) .7 .9 (B) .7 (C): mean .6, residuals -.1 -.4 | .1 .3 | .1, S_L = 1.0
#   Q accuracies .5 .2 (A) .1 (B) .2 (C) .5 (D): mean .3, residuals .2 -.1 | -.2 | -.1 | .2, S_Q = .8
#   per owner (n_L, n_Q, R_L, R_Q): A (2, 2, -.5, .1), B (2, 1, .4, -.2), C (1, 1, .1, -.1), D (0, 1, 0, .2)
# A: both halves cost the same (a seeded draw); call A's half X.
# B: X: |4-0|/5 + |3-0|/5 + |-.1|/1 + |-.1|/.8 = 1.625; Y: 0/5 + 1/5 + |-.9|/1 + |.3|/.8 = 1.475 -> Y.
# C: X: 1/5 + 2/5 + |-.8|/1 + |.2|/.8 = 1.65;  Y: 1/5 + 0/5 + |-1.0|/1 + |.4|/.8 = 1.70 -> X
#    (the count term alone, .6 vs .2, would have chosen Y: the residual term decides).
# D: X: 1/5 + 3/5 + .8 + |.4|/.8 = 2.10;       Y: 1/5 + 1/5 + .8 + 0/.8 = 1.20 -> Y.
HAND = {
    "A/Llama-a1": 5, "A/Qwen-a1": 5, "A/Llama-a2": 2, "A/Qwen-a2": 2,
    "B/Llama-b1": 7, "B/Qwen-b1": 1, "B/Llama-b2": 9,
    "C/Qwen-c1": 2, "C/Llama-c1": 7,
    "D/Qwen-d1": 5,
}  # fmt: skip


@pytest.mark.parametrize("seed", [POPULATION_SEED, 0, 1, 2])
def test_greedy_split_matches_hand_derivation(seed):
    pop = audit_population(population(HAND), min_family_size=1, seed=seed)
    fold = pop.groupby("owner")["fold"].first()
    assert fold["A"] == fold["C"] and fold["B"] == fold["D"] and fold["A"] != fold["B"]


def test_first_owner_tie_is_a_seeded_draw():
    ds = population(HAND)
    folds = [audit_population(ds, min_family_size=1, seed=s).iloc[0]["fold"] for s in range(6)]
    assert set(folds) == {0, 1}
    assert [audit_population(ds, min_family_size=1, seed=s).iloc[0]["fold"] for s in range(2)] == folds[:2]


def random_population(seed: int, n_owners: int = 60) -> xr.Dataset:
    """Owners with 1-8 checkpoints of random families (some 'other'), random accuracies."""
    rng = np.random.default_rng(seed)
    names = [f.split("/")[0] for f in FAMILIES] + ["gpt"]
    ids = [
        f"owner{o}/{names[rng.integers(len(names))]}-{k}" for o in range(n_owners) for k in range(rng.integers(1, 9))
    ]
    y = (rng.random((40, len(ids))) < rng.random(len(ids))).astype(np.int8)
    y[0], y[1] = 1, 0  # every model has an observed correct and wrong answer
    return make_responses(y, model_id=ids)


@pytest.mark.parametrize("seed", range(3))
def test_population_invariants(seed):
    ds = random_population(seed)
    pop = audit_population(ds, owner_cap=3, min_family_size=10, seed=seed)
    retained = pop[pop["status"] == "retained"]
    assert retained.groupby("owner")["fold"].nunique().eq(1).all()  # owners never in both folds
    assert ((pop["fold"] >= 0) == (pop["status"] == "retained")).all()
    assert retained.groupby(["family", "fold"]).size().unstack().min().min() > 0
    assert retained.groupby("fold")["owner"].nunique().min() >= 2
    assert retained.groupby(["owner", "family"]).size().max() <= 3
    assert retained.groupby("family").size().min() >= 10
    over = pop[pop["status"] == "over owner cap"]
    eligible = pop[pop["status"].isin(["retained", "over owner cap", "family below minimum"])]
    assert set(over[["owner", "family"]].itertuples(index=False)) <= set(
        eligible.groupby(["owner", "family"]).size().loc[lambda n: n > 3].index
    )
    reps = retained[retained["representative"]]
    assert len(reps) == len(retained.groupby(["owner", "family"])) and not reps[["owner", "family"]].duplicated().any()
    pairs: dict[tuple[str, str], list[tuple[float, str]]] = {}  # reference in plain Python
    for owner, family, accuracy, model_id in retained[["owner", "family", "accuracy", "model_id"]].itertuples(False):
        pairs.setdefault((owner, family), []).append((accuracy, model_id))
    expected = {}
    for key, members in pairs.items():
        median = float(np.median([a for a, _ in members]))
        closest = min(abs(a - median) for a, _ in members)
        expected[key] = min(m for a, m in members if abs(a - median) <= closest + 1e-12)
    assert reps_of(pop) == expected
    pd.testing.assert_frame_equal(pop, audit_population(ds, owner_cap=3, min_family_size=10, seed=seed))


def test_split_balances_families_on_a_large_population():
    pop = audit_population(random_population(7, n_owners=400), min_family_size=20)
    per_half = pop[pop["status"] == "retained"].groupby(["family", "fold"]).size().unstack()
    assert ((per_half[0] - per_half[1]).abs() <= 0.1 * per_half.sum(axis=1)).all()


# ----------------------------------------------------------------------------- representatives
REPS = two_families(4) | {
    "o1/Qwen-r1": 2, "o1/Qwen-r2": 4, "o1/Qwen-r3": 6,  # o1 Qwen: .3 .2 .4 .6 -> median .35: tie .3 / .4
    "o2/Llama-b": 3, "o2/Llama-a": 7,  # o2 Llama: .7 .3 .7 -> median .7: o2/Llama-2 and o2/Llama-a tie
    "o3/Qwen-z": 3, "o3/Qwen-y": 7,  # o3 Qwen: .5 .3 .7 -> median .5: o3/Qwen-3
}  # fmt: skip


def reps_of(pop: pd.DataFrame) -> dict[tuple[str, str], str]:
    chosen = pop[pop["representative"]]
    return {(o, f): m for o, f, m in zip(chosen["owner"], chosen["family"], chosen["model_id"], strict=True)}


def test_representative_closest_to_median_with_id_ties():
    ds = population(REPS)
    reps = reps_of(audit_population(ds, min_family_size=1))
    assert reps[("o1", "Qwen")] == "o1/Qwen-1"  # .3 and .4 both .05 from .35; "o1/Qwen-1" < "o1/Qwen-r2"
    assert reps[("o2", "Llama")] == "o2/Llama-2"  # .7 twice (distance 0); "o2/Llama-2" < "o2/Llama-a"
    assert reps[("o3", "Qwen")] == "o3/Qwen-3"
    assert reps[("o4", "Llama")] == "o4/Llama-4" and len(reps) == 8


def test_two_checkpoint_tie_is_not_decided_by_rounding():
    # median of .3 and .7 is .5; in floating point |.7 - .5| < |.3 - .5|, yet the smaller id must win
    models = two_families(4, start=2) | {"o1/Qwen-a": 3, "o1/Qwen-b": 7, "o1/Llama-1": 5}
    reps = reps_of(audit_population(population(models), min_family_size=1))
    assert reps[("o1", "Qwen")] == "o1/Qwen-a"


def test_lexicographic_representative():
    reps = reps_of(audit_population(population(REPS), min_family_size=1, representative="lexicographic"))
    assert reps[("o1", "Qwen")] == "o1/Qwen-1" and reps[("o2", "Llama")] == "o2/Llama-2"
    assert reps[("o3", "Qwen")] == "o3/Qwen-3"
    more = {"o9/Qwen-b": 9, "o9/Qwen-a": 0, "o9/Qwen-c": 5} | two_families(4)
    assert reps_of(audit_population(population(more), min_family_size=1, representative="lexicographic"))[
        ("o9", "Qwen")
    ] == "o9/Qwen-a"


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        (
            {"owner_cap": 0},
            r"^The 'owner_cap' parameter of audit_population must be a positive integer; got 0\.$",
        ),
        ({"owner_cap": 2.0}, r"'owner_cap' parameter .* positive integer; got 2\.0"),
        ({"min_family_size": 0}, r"'min_family_size' parameter .* positive integer; got 0"),
        ({"min_family_size": True}, r"'min_family_size' parameter .*; got True"),
        ({"seed": -1}, r"'seed' parameter .* non-negative integer; got -1"),
        (
            {"representative": "mean"},
            r"^The 'representative' parameter of audit_population must be one of "
            r"\{'median', 'lexicographic'\}; got 'mean'( \(did you mean 'median'\?\))?\.$",
        ),
        ({"families": "Qwen"}, r"'families' parameter .* distinct family labels; got 'Qwen'"),
        ({"families": ["Qwen", "Qwen"]}, r"'families' parameter .*; got \['Qwen', 'Qwen'\]"),
        ({"families": []}, r"'families' parameter .*; got \[\]"),
    ],
)
def test_bad_arguments(kwargs, pattern):
    with pytest.raises(ConfigError, match=pattern):
        audit_population(population(two_families()), **kwargs)


def test_not_a_response_dataset():
    with pytest.raises(DataError, match="no 'responses' variable; build one with bayesirt.data.make_responses"):
        audit_population(xr.Dataset())
    ds = population(two_families()).drop_vars("owner")
    with pytest.raises(DataError, match=r"no per-model 'owner' coordinate; .* ds.assign_coords\(owner="):
        audit_population(ds)


def test_model_without_observed_responses():
    ds = population(two_families())
    ds["responses"][:, 2] = MISSING
    with pytest.raises(DataError, match=r"model 'o2/Qwen-2' has no observed responses; drop it"):
        audit_population(ds, min_family_size=1)


def test_fewer_than_two_families():
    models = two_families(5) | {"o1/phi-2": 5, "o2/phi-lora": 5, "o3/Gemma-dpo": 5, "o4/gpt-2": 3, "o5/gpt-3": 3}
    del models["o1/Llama-1"]
    with pytest.raises(DataError) as info:
        audit_population(population(models), min_family_size=5, lineage_filter=True)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("only 1 family left after exclusions (family labels seen, models in the data / after "
                              "the owner cap: Qwen 5 / 5, Llama 4 / 4, Phi 2 / 1, other 2 (not audited), Gemma 1 / 0; "
                              "kept: Qwen, 5 models; dropped: ")
    assert "Llama, 4 models after the owner cap, below min_family_size=5" in message
    assert "Phi, 1 model after the owner cap, below min_family_size=5" in message
    assert "Gemma, all 1 model removed by the lineage filter" in message
    assert "Mistral" not in message  # only labels the data have
    assert "unused: 2 models without an audited family, 0 models ambiguous)" in message
    assert message.endswith("lower min_family_size (--min-family-size), name the labels to audit with families "
                            "(--families), or, if the labels should come from the model ids, derive them by the NT "
                            "C.1 rule (--derive-families), or add models of more families")


def test_fewer_than_four_owners():
    with pytest.raises(DataError, match=r"only 3 owner\(s\) in the retained population; .* at least 4"):
        audit_population(population(two_families(3)), min_family_size=1)


def test_half_without_a_family():
    models = two_families(4) | {"o1/phi-2": 5, "o1/phi-3": 6}  # Phi from one owner only
    pattern = r"owner half [01] has no Phi models .* \(Phi has 2 retained models from 1 owner\(s\)\); .* leave Phi out"
    with pytest.raises(DataError, match=pattern):
        audit_population(population(models), min_family_size=1)


def test_half_with_one_owner():
    # equal accuracies: no residual term; the big owner A is balanced by all three small owners
    models = {f"A/Qwen-{k}": 5 for k in range(5)} | {f"A/Llama-{k}": 5 for k in range(5)}
    models |= {"B/Qwen-1": 5, "C/Llama-1": 5, "D/Qwen-1": 5}
    with pytest.raises(DataError, match=r"owner half [01] has only 1 owner after the owner-disjoint split"):
        audit_population(population(models), min_family_size=1)
