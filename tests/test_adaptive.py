"""Static tests and the CAT engine: EAP against brute-force grid posteriors, MAP against SciPy,
CAT against random selection on simulated 2PL data with known abilities, quotas, missing
responses, stopping rules and every bad-input message."""

from itertools import combinations

import numpy as np
import pytest
from scipy import optimize, stats
from scipy.special import expit

from bayesirt.safety.adaptive import ability_grid, quota_counts, run_cat, score_test, static_test
from bayesirt.errors import BayesIRTError
from bayesirt.models.information import item_information


def _bank(n_items, seed, kind="2pl"):
    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.2, 0.3, n_items)
    d = -a * rng.normal(0, 1.5, n_items)
    c = rng.uniform(0.05, 0.25, n_items) if kind in ("3pl", "4pl") else np.zeros(n_items)
    s = rng.uniform(0.02, 0.15, n_items) if kind == "4pl" else np.zeros(n_items)
    return a, d, c, s


def _simulate(bank, theta, seed, missing=0.0):
    a, d, c, s = bank
    rng = np.random.default_rng(seed)
    p = c[:, None] + (1 - c - s)[:, None] * expit(a[:, None] * theta + d[:, None])
    y = (rng.random(p.shape) < p).astype(np.int8)
    y[rng.random(p.shape) < missing] = -1
    return y


def _brute_force_eap(y, bank, nodes, weights):
    """Posterior mean and SD by the product of per-item probabilities at every node (no logs)."""
    a, d, c, s = bank
    out = []
    for m in range(y.shape[1]):
        like = np.ones_like(nodes)
        for j in np.flatnonzero(y[:, m] >= 0):
            p = c[j] + (1 - c[j] - s[j]) * expit(a[j] * nodes + d[j])
            like *= p if y[j, m] == 1 else 1 - p
        w = like * weights / np.sum(like * weights)
        mean = np.sum(w * nodes)
        out.append((mean, np.sqrt(np.sum(w * (nodes - mean) ** 2))))
    return np.array(out).T


@pytest.mark.parametrize("kind", ["2pl", "4pl"])
def test_eap_matches_brute_force_grid_and_dense_integral(kind):
    bank = _bank(15, 1, kind)
    y = _simulate(bank, np.linspace(-2, 2, 6), 2, missing=0.2)
    est = score_test(y, *bank[:2], guessing=bank[2], slip=bank[3])
    nodes, logw = ability_grid()
    mean, sd = _brute_force_eap(y, bank, nodes, np.exp(logw))
    np.testing.assert_allclose(est.theta, mean, atol=1e-10)
    np.testing.assert_allclose(est.sd, sd, atol=1e-10)
    dense = np.linspace(-10, 10, 20001)  # an independent quadrature of the same integrals
    mean, sd = _brute_force_eap(y, bank, dense, stats.norm.pdf(dense))
    np.testing.assert_allclose(est.theta, mean, atol=1e-6)
    np.testing.assert_allclose(est.sd, sd, atol=1e-6)


def test_cat_eap_updates_match_brute_force_after_every_item():
    bank = _bank(40, 3, "3pl")
    y = _simulate(bank, np.array([-1.5, 0.0, 0.7, 2.0]), 4, missing=0.1)
    res = run_cat(y, *bank[:2], guessing=bank[2], budget=8)
    nodes, logw = ability_grid()
    for t in range(9):
        seen = np.full_like(y, -1)
        for m in range(y.shape[1]):
            given = res.items[m, :t]
            seen[given, m] = y[given, m]
        mean, sd = _brute_force_eap(seen, bank, nodes, np.exp(logw))
        np.testing.assert_allclose(res.theta[:, t], mean, atol=1e-6)
        np.testing.assert_allclose(res.sd[:, t], sd, atol=1e-6)


@pytest.mark.parametrize("kind", ["2pl", "3pl", "4pl"])
def test_map_matches_scipy(kind):
    bank = _bank(12, 5, kind)
    y = _simulate(bank, np.array([-1.0, 0.3, 1.8]), 6)
    est = score_test(y, *bank[:2], guessing=bank[2], slip=bank[3], method="map", prior_mean=0.2, prior_sd=1.3)
    a, d, c, s = bank
    for m in range(y.shape[1]):
        def neg(t, m=m):
            p = c + (1 - c - s) * expit(a * t + d)
            return -(np.sum(np.where(y[:, m] == 1, np.log(p), np.log1p(-p))) + stats.norm.logpdf(t, 0.2, 1.3))
        ref = optimize.minimize_scalar(neg, bounds=(-6, 6), method="bounded", options={"xatol": 1e-10})
        assert est.theta[m] == pytest.approx(ref.x, abs=1e-6)
        h = 1e-4
        curvature = (neg(ref.x + h) - 2 * neg(ref.x) + neg(ref.x - h)) / h**2
        assert est.sd[m] == pytest.approx(1 / np.sqrt(curvature), rel=1e-4)


def test_cat_map_estimator_scores_administered_items():
    bank = _bank(30, 7)
    y = _simulate(bank, np.array([-1.0, 0.5, 1.5]), 8)
    res = run_cat(y, *bank[:2], budget=6, estimator="map")
    for m in range(3):
        ref = score_test(y[:, [m]], *bank[:2], res.items[m], method="map")
        assert res.theta[m, -1] == pytest.approx(ref.theta[0], abs=1e-8)


@pytest.mark.parametrize("rule", ["posterior", "kl"])
def test_posterior_rules_pick_the_brute_force_maximum(rule):
    """First and second items against the criteria written out node by node."""
    a, d, c, s = _bank(25, 21, "3pl")
    y = _simulate((a, d, c, s), np.array([-0.5, 1.2]), 22)
    res = run_cat(y, a, d, guessing=c, budget=2, rule=rule)
    nodes, logw = ability_grid()
    p = c[:, None] + (1 - c)[:, None] * expit(a[:, None] * nodes + d[:, None])  # (item, node)
    for m in range(2):
        for t in range(2):
            like = np.ones_like(nodes)
            for j in res.items[m, :t]:
                like *= p[j] if y[j, m] == 1 else 1 - p[j]
            w = like * np.exp(logw) / np.sum(like * np.exp(logw))
            if rule == "posterior":
                crit = item_information(nodes, a, d, c) @ w
            else:
                p0 = c + (1 - c) * expit(a * res.theta[m, t] + d)
                kl = p0[:, None] * np.log(p0[:, None] / p) + (1 - p0)[:, None] * np.log((1 - p0)[:, None] / (1 - p))
                crit = kl @ w
            crit[res.items[m, :t]] = -np.inf
            assert res.items[m, t] == np.argmax(crit)


@pytest.mark.slow
def test_cat_beats_random_selection_at_25_items():
    """Five replications of 30 examinees on a 200-item 2PL bank: ability RMSE against the truth."""
    cat, rand = {"fisher": [], "posterior": [], "kl": []}, []
    for rep in range(5):
        bank = _bank(200, 100 + rep)
        theta = np.random.default_rng(200 + rep).normal(0, 1, 30)
        y = _simulate(bank, theta, 300 + rep)
        for rule in cat:
            cat[rule].append(np.sqrt(np.mean((run_cat(y, *bank[:2], budget=25, rule=rule).theta[:, -1] - theta) ** 2)))
        rng = np.random.default_rng(400 + rep)
        rand.append(np.mean([np.sqrt(np.mean((score_test(y, *bank[:2], rng.choice(200, 25, replace=False)).theta
                                              - theta) ** 2)) for _ in range(5)]))
    for rule, values in cat.items():
        assert np.all(np.array(values) < np.array(rand)), rule  # every replication
        assert np.mean(values) < 0.8 * np.mean(rand), rule  # observed ~0.66


def test_cat_first_item_is_most_informative_at_prior_mean_and_ties_go_low():
    a, d = np.array([1.0, 2.0, 2.0, 0.5]), np.array([0.0, 0.0, 0.0, 0.0])
    y = np.ones((4, 2), dtype=np.int8)
    assert run_cat(y, a, d, budget=1).items[:, 0].tolist() == [1, 1]
    assert static_test(a, d, [0.0], 2, design="max_information").tolist() == [1, 2]
    assert static_test(a, d, [0.0], 2, design="stratified").tolist() == [1, 2]  # both strata at 0: the two best
    # the default (representative): equal easiness, strata {0, 1} and {2, 3} by index; the best item, then the
    # bank's share (1 of 2) below its median discrimination 1.5 from the other stratum
    assert static_test(a, d, [0.0], 2).tolist() == [1, 3]


def test_cat_skips_missing_and_stops_when_bank_runs_out():
    bank = _bank(20, 9)
    y = _simulate(bank, np.array([0.0, 1.0]), 10)
    y[:, 1] = -1
    y[[3, 5], 1] = [1, 0]
    res = run_cat(y, *bank[:2], budget=5)
    assert np.all(y[res.items[0], 0] >= 0) and res.n_items.tolist() == [5, 2]
    assert sorted(res.items[1, :2]) == [3, 5] and res.items[1, 2:].tolist() == [-1, -1, -1]
    assert np.all(res.theta[1, 2:] == res.theta[1, 2])  # carried forward


def test_cat_min_sd_stopping():
    bank = _bank(150, 11)
    y = _simulate(bank, np.random.default_rng(12).normal(0, 1, 25), 13)
    res = run_cat(y, *bank[:2], budget=60, min_sd=0.4)
    n = res.n_items
    assert np.all(res.sd[np.arange(25), n] < 0.4)
    assert np.all(res.sd[np.arange(25), n - 1] >= 0.4)
    assert n.max() < 60


def test_cat_content_balancing_meets_quotas_at_every_length():
    bank = _bank(60, 14)
    groups = np.repeat(["a", "b", "c"], [10, 20, 30])
    y = _simulate(bank, np.random.default_rng(15).normal(0, 1, 8), 16)
    res = run_cat(y, *bank[:2], budget=30, groups=groups)
    for t in range(1, 31):
        want = quota_counts(groups, t)
        for m in range(8):
            got = {g: int(np.sum(groups[res.items[m, :t]] == g)) for g in want}
            assert got == want


def test_quota_counts_house_monotone_and_near_shares():
    groups = np.repeat(["p", "q", "r", "s"], [7, 13, 29, 51])
    previous = dict.fromkeys("pqrs", 0)
    for k in range(1, 101):
        counts = quota_counts(groups, k)
        assert sum(counts.values()) == k
        assert all(counts[g] >= previous[g] for g in counts)
        assert all(abs(counts[g] - k * n / 100) < 1 for g, n in zip("pqrs", [7, 13, 29, 51]))
        previous = counts
    assert quota_counts(groups, 100) == {"p": 7, "q": 13, "r": 29, "s": 51}


def test_static_test_is_optimal_and_respects_quotas():
    a, d, _, _ = _bank(9, 17)
    abilities = np.random.default_rng(18).normal(0, 1, 50)
    score = item_information(abilities, a, d).sum(1)
    chosen = static_test(a, d, abilities, 3, design="max_information")
    assert score[chosen].sum() == pytest.approx(max(score[list(c)].sum() for c in combinations(range(9), 3)))
    assert np.all(np.diff(score[chosen]) <= 0)  # selection order
    groups = np.array(list("aaabbbbcc"))
    quotas = {"a": 1, "b": 0, "c": 2}
    got = static_test(a, d, abilities, 3, groups=groups, quotas=quotas, design="max_information")
    assert {g: int(np.sum(groups[got] == g)) for g in "abc"} == quotas
    assert set(got[groups[got] == "c"]) == {7, 8}
    assert sorted(got[groups[got] == "a"]) == [max(range(3), key=score.__getitem__)]
    for design in ("max_information", "stratified", "population"):
        prop = static_test(a, d, abilities, 5, groups=groups, design=design)
        assert {g: int(np.sum(groups[prop] == g)) for g in "abc"} == quota_counts(groups, 5)
        assert len(set(prop.tolist())) == 5


def test_static_designs_follow_the_cohort():
    """A cohort of 80 weak models (theta -1.5) and 20 strong ones (+1.5), items of discrimination 2 with
    difficulties every 0.5 logits: the maximum-information test puts all 5 items at or below 0 (summed
    information is dominated by the weak cluster); the stratified test takes, for the strata medians
    (quantiles .1 .3 .5 .7 = -1.5, .9 = +1.5), the best free item at each, ties to the lowest index; the
    population design spends its first item where the cohort is dense (argmax of mean log(1 + I)), then
    reaches the strong models once the weak ones are measured (diminishing returns)."""
    b = np.arange(-3.0, 3.01, 0.5)
    a = np.full_like(b, 2.0)
    d = -a * b
    theta = np.r_[np.full(80, -1.5), np.full(20, 1.5)]
    assert np.all(b[static_test(a, d, theta, 5, design="max_information")] <= 0.0)
    assert b[static_test(a, d, theta, 5, design="stratified")].tolist() == [-1.5, -2.0, -1.0, -2.5, 1.5]
    pop = static_test(a, d, theta, 5, design="population")
    gain = np.log(1.0 + item_information(theta, a, d)).mean(axis=1)
    assert pop[0] == int(np.argmax(gain)) and b[pop[0]] == -1.5
    assert b[pop].tolist() == [-1.5, -1.0, -2.0, 1.5, -0.5]
    with pytest.raises(BayesIRTError, match="'design' parameter of static_test must be one of"):
        static_test(a, d, theta, 5, design="random")


def test_score_test_subsets_missing_and_no_data():
    bank = _bank(10, 19)
    y = _simulate(bank, np.array([0.0, 1.0, -1.0]), 20)
    y[:, 2] = -1
    items = np.array([1, 4, 6])
    sub = score_test(y, *bank[:2], items)
    direct = score_test(y[items], *(x[items] for x in bank[:2]))
    np.testing.assert_allclose(sub.theta, direct.theta)
    assert sub.theta[2] == pytest.approx(0.0, abs=1e-12) and sub.sd[2] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("call, match", [
    (lambda a, d, y: static_test(a, d, [0.0], 0), r"The 'k' parameter of static_test must be an integer in \[1, 4\]; got 0."),
    (lambda a, d, y: static_test(a, d, [], 2), "abilities must be a non-empty array"),
    (lambda a, d, y: static_test(a, d, [0.0], 2, quotas="proportional"), "static_test: quotas were given without groups"),
    (lambda a, d, y: static_test(a, d, [0.0], 2, groups=["x"]), "groups must have one label per item"),
    (lambda a, d, y: static_test(a, d, [0.0], 2, groups=list("xxyy"), quotas={"z": 2}), r"The 'quotas' parameter of static_test must be a dict over the groups \['x', 'y'\]; got \{'z': 2\} \(unknown groups: \['z'\]\)"),
    (lambda a, d, y: static_test(a, d, [0.0], 2, groups=list("xxyy"), quotas={"x": 3}), r"The 'quotas\['x'\]' parameter of static_test must be an integer in \[0, 2\]"),
    (lambda a, d, y: static_test(a, d, [0.0], 2, groups=list("xxyy"), quotas={"x": 1}), "static_test: quotas sum to 1 but k=2"),
    (lambda a, d, y: static_test(a, d, [0.0], 2, groups=list("xxyy"), quotas="equal"), "'quotas' parameter of static_test must be"),
    (lambda a, d, y: static_test(a, d, [0.0], 2, groups=list("xxyy"), quotas=[1, 1]), "'quotas' parameter of static_test must be"),
    (lambda a, d, y: score_test(y, a, d, method="mle"), "'method' parameter of score_test must be one of"),
    (lambda a, d, y: score_test(y[:3], a, d), "responses have 3 items"),
    (lambda a, d, y: score_test(y + 1, a, d), "responses must contain only 1"),
    (lambda a, d, y: score_test(y[None], a, d), r"responses must be an \(item, model\) matrix"),
    (lambda a, d, y: score_test(y, a, d, [0, 9]), r"The 'items' parameter of score_test must be 1-D integer indices in \[0, 4\)"),
    (lambda a, d, y: score_test(y, a, d, points=5), r"The 'points' parameter of ability_grid must be an integer in \[21, 4001\]; got 5."),
    (lambda a, d, y: score_test(y, a, d, prior_sd=0.0), "The 'prior_sd' parameter of ability_grid must be a number > 0; got 0.0."),
    (lambda a, d, y: run_cat(y, a, d, budget=5), r"The 'budget' parameter of run_cat must be an integer in \[1, 4\]"),
    (lambda a, d, y: run_cat(y, a, d, budget=2, rule="random"), "'rule' parameter of run_cat must be one of"),
    (lambda a, d, y: run_cat(y, a, d, budget=2, estimator="mle"), "'estimator' parameter of run_cat must be one of"),
    (lambda a, d, y: run_cat(y, a, d, budget=2, min_sd=-1.0), "The 'min_sd' parameter of run_cat must be a number > 0 or None; got -1.0."),
    (lambda a, d, y: run_cat(y, a, d, budget=2, groups=["x"]), "groups must have one label per item"),
])
def test_errors(call, match):
    a, d = np.ones(4), np.zeros(4)
    y = np.array([[1, 0], [0, 1], [1, -1], [0, 0]], dtype=np.int8)
    with pytest.raises(BayesIRTError, match=match):
        call(a, d, y)
