"""Tests of the 1PL-4PL model ladder (SAFE App. E) on LSAT6."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bayesirt.data import load_dataset
from bayesirt.frequentist import pl_ladder
from bayesirt.frequentist.ladder import BOUNDARY_CAVEAT


@pytest.fixture(scope="module")
def ladder():
    return pl_ladder(load_dataset("lsat6"))


def test_table(ladder):
    table, _ = ladder
    assert list(table["model"]) == ["1pl", "2pl", "3pl", "4pl"]
    assert list(table.columns) == ["model", "spec", "loglik", "n_parameters", "aic", "bic", "iterations",
                                   "converged", "map_asymptotes", "start"]
    t = table.set_index("model")
    assert t.loc["1pl", "loglik"] == pytest.approx(-2466.938, abs=0.005)
    assert t.loc["2pl", "loglik"] == pytest.approx(-2466.653, abs=0.005)
    assert list(table["n_parameters"]) == [6, 10, 15, 20]
    assert list(table["map_asymptotes"]) == [False, False, True, True]
    assert table["converged"].all()
    assert table["start"].iloc[0] == "default" and set(table["start"].iloc[2:]) <= {"default", "from 2pl", "from 3pl"}
    n = 1000
    assert table.attrs["n"] == n
    for _, row in table.iterrows():  # hand check of the criteria
        assert row["aic"] == pytest.approx(-2 * row["loglik"] + 2 * row["n_parameters"])
        assert row["bic"] == pytest.approx(-2 * row["loglik"] + row["n_parameters"] * np.log(n))
    # ltm's printed criteria for the 2PL: AIC 4953.307, BIC 5002.384
    assert t.loc["2pl", "aic"] == pytest.approx(4953.307, abs=0.01)
    assert t.loc["2pl", "bic"] == pytest.approx(5002.384, abs=0.01)


def test_lrt(ladder):
    table, lrt = ladder
    assert list(lrt["comparison"]) == ["1pl->2pl", "2pl->3pl", "3pl->4pl"]
    first = lrt.iloc[0]
    assert first["statistic"] == pytest.approx(2 * (2466.938 - 2466.653), abs=0.02)
    assert first["df"] == 4
    assert first["p"] == pytest.approx(stats.chi2.sf(first["statistic"], 4))
    assert list(lrt["df"]) == [4, 5, 5]
    assert (lrt["note"].iloc[1:] == BOUNDARY_CAVEAT).all()
    assert "boundary" in BOUNDARY_CAVEAT and "conservative" in BOUNDARY_CAVEAT
    ll = table["loglik"].to_numpy()
    np.testing.assert_allclose(lrt["statistic"], 2 * np.diff(ll))
    assert ((lrt["p"] >= 0) & (lrt["p"] <= 1)).all()


def test_asymptote_rungs_keep_the_better_of_two_starts():
    from bayesirt.frequentist import fit_mml
    from bayesirt.frequentist.ladder import _best_fit

    lsat6 = load_dataset("lsat6")
    two = fit_mml(lsat6, "2pl", se=False)
    best, start, _ = _best_fit(lsat6, "3pl", ("2pl", two), se=False)
    candidates = {"default": fit_mml(lsat6, "3pl", se=False), "from 2pl": fit_mml(lsat6, "3pl", se=False, start=two)}
    assert best.objective == max(c.objective for c in candidates.values())
    assert best.objective == candidates[start].objective
