"""Response fingerprints: disagreement against a hand count, the self-disagreement null from
repeats and from resampling, identification and verdicts on a constructed case (re-collections,
a drifted endpoint, an alias pair, an unclaimed endpoint), the resolvable ability gap, the job's
files and every error message."""

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bayesirt.data import make_responses, simulate_pl
from bayesirt.errors import BayesIRTError, ConfigError, OutputError
from bayesirt.safety.fingerprint import disagreement, gap_at, identify, resolvable_gap, self_disagreement_null
from bayesirt.jobs.safety import run_fingerprint_job

N_ITEMS, N_MODELS, REPEATS, NOISE = 200, 30, 3, 0.03


def _flip(column, rate, rng):
    return np.where(rng.random(column.shape) < rate, 1 - column, column)


@pytest.fixture(scope="module")
def case():
    """30 reference identities collected 3 times each (3% of responses flip between collections);
    m001 and m002 serve the same weights (an alias pair). Queries: m003-m007 re-collected, m008
    drifted (30% flips), 'm009' actually serves m010, and an unclaimed endpoint serving m011."""
    responses, truth = simulate_pl("2pl", n_items=N_ITEMS, n_models=N_MODELS, seed=1)
    y = responses["responses"].values.copy()
    y[:, 2] = y[:, 1]
    rng = np.random.default_rng(0)
    columns, ids, identity = [], [], {}
    for m in range(N_MODELS):
        for r in range(REPEATS):
            columns.append(_flip(y[:, m], NOISE, rng))
            ids.append(f"m{m:03d}#{r}")
            identity[ids[-1]] = f"m{m:03d}"
    items = responses["item"].values
    reference = make_responses(np.array(columns).T, item_id=items, model_id=ids)
    sources = [(f"m{m:03d}", m, NOISE) for m in range(3, 8)] + [("m008", 8, 0.3), ("m009", 10, NOISE),
                                                                 ("anon", 11, NOISE), ("m001", 1, NOISE)]
    query = make_responses(np.array([_flip(y[:, m], rate, rng) for _, m, rate in sources]).T, item_id=items,
                           model_id=[q for q, _, _ in sources])
    return reference, query, identity, truth


def test_disagreement_against_a_hand_count():
    ref = make_responses(np.array([[1, 0], [0, 0], [1, np.nan], [0, 1]] * 3), item_id=list("abcdefghijkl"))
    qry = make_responses(np.array([[1, 1], [1, 0], [0, 1], [np.nan, 0]] * 3), item_id=list("abcdefghijkl"))
    table = disagreement(ref, qry)
    # query 0 vs reference 0: items 1-3 shared, 2 and 3 differ; vs reference 1: items 1-2, both differ.
    # query 1 vs reference 0: all 4 shared, none differs; vs reference 1: items 1, 2, 4, items 1 and 4 differ
    np.testing.assert_allclose(table["disagreement"].values, [[2 / 3, 1.0], [0.0, 2 / 3]])
    np.testing.assert_array_equal(table["shared"].values, [[9, 6], [12, 9]])
    assert table.attrs["items"] == 12


def test_null_from_repeats_is_every_within_identity_pair(case):
    reference, _, identity, _ = case
    null = self_disagreement_null(reference, identity=identity)
    assert null.attrs["source"] == "repeats" and null.sizes["pair"] == N_MODELS * 3
    assert (null["identity"].values == np.char.partition(null["first"].values.astype(str), "#")[:, 0]).all()
    # two independent 3% flips disagree on about 2 * 0.03 * 0.97 = 5.8% of items
    assert np.median(null["value"].values) == pytest.approx(2 * NOISE * (1 - NOISE), abs=0.01)
    first = reference.isel(model=[0, 1])
    hand = np.mean(first["responses"].values[:, 0] != first["responses"].values[:, 1])
    assert null["value"].values[0] == pytest.approx(hand)


def test_identification_and_verdicts(case):
    reference, query, identity, _ = case
    null = self_disagreement_null(reference, identity=identity)
    claims = {q: q for q in query["model"].values if q != "anon"}
    result = identify(reference, query, null, reference_identity=identity, claim=claims).set_index("query")
    for q in ("m003", "m004", "m005", "m006", "m007"):
        assert result.loc[q, "verdict"] == "consistent" and result.loc[q, "nearest"] == q
        assert result.loc[q, "claim_p"] > 0.05
    assert result.loc["m008", "verdict"] == "changed" and result.loc["m008", "claim_p"] == 1 / 91
    assert result.loc["m009", "verdict"] == "changed" and result.loc["m009", "nearest"] == "m010"
    assert result.loc["anon", "verdict"] == "identified" and result.loc["anon", "nearest"] == "m011"
    assert result.loc["anon", "claim"] == ""
    assert result.loc["m001", "verdict"] == "ambiguous" and set(result.loc["m001", "within"].split(";")) == {
        "m001", "m002"}
    assert (result["shared_items"] == N_ITEMS).all()


def test_resampling_null_matches_its_expectation(case):
    _, _, _, truth = case
    responses, _ = simulate_pl("2pl", n_items=N_ITEMS, n_models=N_MODELS, seed=1)
    null = self_disagreement_null(responses, items=truth, null="resampling", resamples=400, seed=3)
    assert null.attrs["source"] == "resampling" and null.sizes["pair"] == N_MODELS * 400
    values = null["value"].values.reshape(N_MODELS, 400)
    from bayesirt.safety.adaptive import score_test

    y = responses["responses"].values
    a, d = truth["discrimination"].values, truth["intercept"].values
    theta = score_test(y, a, d, method="map").theta
    p = 1 / (1 + np.exp(-(a[:, None] * theta + d[:, None])))
    expected = np.where(y == 1, 1 - p, p).mean(0)  # Pr(a re-collection differs), per item then averaged
    np.testing.assert_allclose(values.mean(1), expected, atol=4 * 0.035 / np.sqrt(400))
    again = self_disagreement_null(responses, items=truth, null="resampling", resamples=400, seed=3)
    np.testing.assert_array_equal(null["value"].values, again["value"].values)


@pytest.mark.slow
def test_resolvable_gap_recovers_the_interval_rule():
    rng = np.random.default_rng(2)
    full = rng.normal(size=800)
    sd = 0.3
    gaps = resolvable_gap(full, full + rng.normal(scale=sd, size=800), np.full(800, sd), level=0.95, bins=4)
    # distinguished when |difference| > 1.96 * sqrt(2) * sd, which a gap of that size meets half the time
    np.testing.assert_allclose(gaps["gap"].values, 1.96 * np.sqrt(2) * sd, rtol=0.1)
    np.testing.assert_allclose(gaps["spread"].values, np.sqrt(2) * sd, rtol=0.2)
    assert gap_at(gaps, [-10.0])[0] == gaps["gap"].values[0]
    assert 0 < gaps.attrs["resolved_pairs"] < 1 and gaps.attrs["models"] == 800
    finer = resolvable_gap(full, full + rng.normal(scale=0.1, size=800), np.full(800, 0.1), bins=4)
    assert (finer["gap"].values < gaps["gap"].values).all()


def test_job_writes_every_file(tmp_path, case):
    reference, query, identity, _ = case
    pd.DataFrame({"model_id": list(identity), "identity": list(identity.values())}).to_csv(tmp_path / "ids.csv",
                                                                                          index=False)
    out = run_fingerprint_job(reference, query, tmp_path / "fp", identities=tmp_path / "ids.csv")
    names = {p.name for p in out.iterdir()}
    assert names == {"fingerprint.nc", "matches.csv", "disagreement.csv", "null.csv", "summary.json", "report.md",
                     "fingerprint.png"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["null_source"] == "repeats" and summary["verdicts"]["consistent"] == 5
    saved = xr.open_datatree(out / "fingerprint.nc", engine="h5netcdf")
    assert saved["disagreement"]["disagreement"].shape == (9, N_MODELS * REPEATS)
    with pytest.raises(OutputError, match="already exists"):
        run_fingerprint_job(reference, query, out)


def test_error_messages(tmp_path, case):
    reference, query, identity, _ = case
    with pytest.raises(BayesIRTError, match="share 5 item ids; a fingerprint needs at least 10"):
        disagreement(reference, query.isel(item=slice(0, 5)))
    with pytest.raises(BayesIRTError, match=r"identity needs one label per model \(90\)"):
        self_disagreement_null(reference, identity=["a", "b"])
    with pytest.raises(ConfigError, match="The 'resamples' parameter of self_disagreement_null must be a positive integer; got 0."):
        self_disagreement_null(query, null="resampling", resamples=0)
    with pytest.raises(BayesIRTError, match="the fingerprint null needs repeated collections"):
        self_disagreement_null(query)  # no repeats: refused, not an upper bound
    with pytest.raises(BayesIRTError, match="the fingerprint null needs repeated collections"):
        run_fingerprint_job(reference, query, tmp_path / "norepeats")
    with pytest.raises(BayesIRTError, match="'null' parameter of self_disagreement_null must be one of"):
        self_disagreement_null(reference, identity=identity, null="parametric")
    null = self_disagreement_null(reference, identity=identity)
    with pytest.raises(ConfigError, match=r"The 'alpha' parameter of identify must be a number in \(0, 1\); got 0.0."):
        identify(reference, query, null, alpha=0.0)
    with pytest.raises(BayesIRTError, match="non-empty self_disagreement_null"):
        identify(reference, query, null.isel(pair=slice(0, 0)))
    with pytest.raises(ConfigError, match=r"The 'level' parameter of resolvable_gap must be a number in \(0, 1\); got 1.0."):
        resolvable_gap([0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [1.0, 1.0, 1.0], level=1.0)
    with pytest.raises(BayesIRTError, match="at least 3 finite models"):
        resolvable_gap([0.0, 1.0], [0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ConfigError, match="The 'bins' parameter of resolvable_gap must be a positive integer; got 0."):
        resolvable_gap([0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [1.0, 1.0, 1.0], bins=0)
    with pytest.raises(ConfigError, match="The 'max_models' parameter of resolvable_gap must be an integer >= 3; got 2."):
        resolvable_gap([0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [1.0, 1.0, 1.0], max_models=2)
    (tmp_path / "binary.csv").write_bytes(b"model_id,identity\n\xff\xfe\x00,x\n")
    with pytest.raises(BayesIRTError, match="cannot read .*binary.csv"):
        run_fingerprint_job(reference, query, tmp_path / "d", identities=tmp_path / "binary.csv")
    with pytest.raises(BayesIRTError, match="no identities file"):
        run_fingerprint_job(reference, query, tmp_path / "a", identities=tmp_path / "none.csv")
    (tmp_path / "cols.csv").write_text("model,identity\nx,y\n")
    with pytest.raises(BayesIRTError, match="needs columns model_id and identity"):
        run_fingerprint_job(reference, query, tmp_path / "b", identities=tmp_path / "cols.csv")
    (tmp_path / "dup.csv").write_text("model_id,identity\nx,y\nx,z\n")
    with pytest.raises(BayesIRTError, match="model_id 'x' appears twice"):
        run_fingerprint_job(reference, query, tmp_path / "c", identities=tmp_path / "dup.csv")


def test_each_identity_is_judged_against_its_own_null_when_it_has_enough_repeats():
    """A stable endpoint (1% flips between collections) and a noisy one (12%), 8 collections each
    (28 self-disagreements per identity, >= 1 / alpha). A re-collection of the stable one with 6%
    flips is a change for it, though well inside the pooled null (which the noisy identity widens);
    a re-collection of the noisy one at its usual noise stays consistent."""
    responses, _ = simulate_pl("2pl", n_items=400, n_models=2, seed=7)
    y = responses["responses"].values
    rng = np.random.default_rng(5)
    columns, ids, identity = [], [], {}
    for m, (name, noise) in enumerate((("stable", 0.01), ("noisy", 0.12))):
        for r in range(8):
            columns.append(_flip(y[:, m], noise, rng))
            ids.append(f"{name}#{r}")
            identity[ids[-1]] = name
    items = responses["item"].values
    reference = make_responses(np.array(columns).T, item_id=items, model_id=ids)
    query = make_responses(np.array([_flip(y[:, 0], 0.06, rng), _flip(y[:, 1], 0.12, rng)]).T, item_id=items,
                           model_id=["stable", "noisy"])
    null = self_disagreement_null(reference, identity=identity)
    own = identify(reference, query, null, reference_identity=identity).set_index("query")
    assert (own["threshold_source"] == "identity").all()
    assert own.loc["stable", "verdict"] == "changed" and own.loc["stable", "threshold"] < 0.05
    assert own.loc["noisy", "verdict"] == "consistent" and own.loc["noisy", "threshold"] > 0.15
    pooled = identify(reference, query, null, reference_identity=identity, per_identity=False).set_index("query")
    assert (pooled["threshold_source"] == "pooled").all() and pooled.loc["stable", "verdict"] == "consistent"
