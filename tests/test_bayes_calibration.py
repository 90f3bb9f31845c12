"""The Bayesian audit's per-draw randomization p (issues 19 and 29): each posterior draw's low-DIF
reversal rate against blueprint-matched random subtests drawn from that draw's own cells. On a
seeded benchmark without DIF most draws' p stay above .05, as the deterministic p does; with one
family given a planted advantage on 40% of the items most fall to .05 or below, as the deterministic
p does. (The former ``prob_exceeds_random``, a posterior mean of percentiles reported as a
probability, is gone.)"""

import pytest

from bayesirt.audit import AuditConfig, run_audit
from bayesirt.data import plant_family_advantage, simulate_dif_benchmark

CONFIG = AuditConfig(quick=True, controls=99, composition_bootstrap=0, owner_bootstrap=0, bayes=True, bayes_draws=100,
                     bayes_controls=20, bayes_ability_spec=None)  # the near-tie leaderboard's 2PL is not needed here


def _audit(ds):
    result = run_audit(ds, CONFIG, progress=False)
    return result.summary["bayes"], float(result.controls["p_value"].sel(pair_set="primary"))


@pytest.fixture(scope="module")
def null_benchmark():
    return simulate_dif_benchmark(n_owners=150, n_items=120, dif_fraction=0.0, seed=0)[0]


@pytest.mark.slow
def test_no_dif_gives_no_confident_excess(null_benchmark):
    bayes, p = _audit(null_benchmark)
    assert bayes["draw_p_value_q05_q50_q95"][1] > 0.05 and bayes["share_draws_p_le_05"] < 0.5 and p > 0.05
    assert "prob_exceeds_random" not in bayes
    assert bayes["controls_per_draw"] == 20 and "fixed" in bayes["offsets"]


@pytest.mark.slow
def test_a_planted_family_advantage_gives_a_confident_excess(null_benchmark):
    planted, items = plant_family_advantage(null_benchmark, "Qwen", share=0.4, strength=0.9, seed=1000)
    assert 0.3 < items.mean() < 0.5
    bayes, p = _audit(planted)
    assert bayes["draw_p_value_q05_q50_q95"][1] <= 0.05 and bayes["share_draws_p_le_05"] > 0.5 and p <= 0.05
    lo, mid, hi = bayes["excess_pp_q05_q50_q95"]
    assert 0 < lo < mid < hi  # the draws' excess over their own random controls is positive throughout
