"""The calibration benchmarks' own arithmetic: audit_calibration's cluster-robust standard error of a pooled share
(hand-computed cases, and a simulation of correlated benchmarks whose spread it must match) and
audit_composition's testlet labels, and paired_tail_check's empirical-Bayes probability."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from audit_calibration import cluster_se  # noqa: E402
from audit_composition import group_testlets  # noqa: E402
from paired_tail_check import eb_prob  # noqa: E402
from scipy.stats import norm  # noqa: E402


def test_cluster_se_by_hand():
    # r = 10 / 20; residuals 9 - 5 and 1 - 5; 2 / 1 * 32 = 64; sqrt(64) / 20
    assert np.isclose(cluster_se([9, 1], [10, 10]), 0.4)
    assert cluster_se([5, 10], [10, 20]) == 0.0  # equal shares in every benchmark
    assert cluster_se([3, 0], [4, 0]) is None  # one benchmark holds every pair: no spread to estimate


def test_cluster_se_matches_the_spread_of_correlated_benchmarks():
    # each benchmark's pairs share a benchmark-level error: the pooled share varies far more than a binomial
    # over pairs says, and the cluster SE tracks the spread actually seen across repeated studies
    rng = np.random.default_rng(0)
    shares, ses = [], []
    for _ in range(400):
        totals = rng.integers(20, 60, 30)
        p = np.clip(0.9 + rng.normal(0, 0.08, totals.size), 0, 1)
        hits = rng.binomial(totals, p)
        shares.append(hits.sum() / totals.sum())
        ses.append(cluster_se(hits, totals))
    spread, binomial = np.std(shares), np.sqrt(0.9 * 0.1 / 1200)
    assert spread > 1.5 * binomial
    assert abs(np.mean(ses) / spread - 1) < 0.1


def test_testlets_run_within_groups_in_item_order():
    labels = group_testlets(["g0", "g1", "g0", "g1", "g0", "g0", "g0", "g0"], 2)
    assert labels.tolist() == ["g0-t0", "g1-t0", "g0-t0", "g1-t0", "g0-t1", "g0-t1", "g0-t2", "g0-t2"]
    assert len(set(group_testlets([f"g{i % 4}" for i in range(600)], 5))) == 4 * 30


def test_eb_prob_is_flat_among_spread_gaps_and_shrinks_among_clones():
    rng = np.random.default_rng(1)
    # neighbours' gaps spread over +-50 pp: the fitted prior is flat at the pp scale, P = Phi(mean / sd)
    spread = rng.normal(0, 0.25, 4000)
    assert abs(eb_prob(0.02, 0.01, spread + rng.normal(0, 0.01, spread.size), np.full(spread.size, 0.01))
               - norm.cdf(2.0)) < 0.01
    # neighbours all true ties (gap 0, noise of their sd): the prior sits at the grid's smallest sd, a 2-sd gap is
    # mostly noise and P stays well inside the calls
    clones = rng.normal(0, 0.01, 4000)
    assert 0.5 < eb_prob(0.02, 0.01, clones, np.full(clones.size, 0.01)) < 0.8
