"""Person fit: l_z and l_z* against hand computations and exact enumeration, reversed-Guttman
detection at the calibrated cut-off, the cut-off's false-positive rate, ROC curves, posterior
predictive p-values, the job's files and every error message."""

import itertools
import json
import math

import numpy as np
import pytest
import xarray as xr

from bayesirt.safety.adaptive import ability_grid, grid_log_posterior, score_test
from bayesirt.data import make_responses, simulate_pl
from bayesirt.errors import BayesIRTError, ConfigError, DataError, OutputError
from bayesirt.frequentist.mml import fit_mml
from bayesirt.models.information import item_bank
from bayesirt.safety.personfit import (calibrate_cutoff, check_responses, item_parameters, lz_statistics, misfit_spread,
                                      person_fit, posterior_predictive_person_fit, roc_auc, roc_curve)
from bayesirt.jobs.safety import run_personfit_job

A = np.array([1.0, 1.5, 0.8])
D = np.array([0.5, -0.2, -1.0])


def _hand(x, theta, a, d, c, s, r0):
    """l_z and l_z* written out item by item; dP/dtheta by central differences."""
    def prob(i, t):
        return c[i] + (1 - c[i] - s[i]) / (1 + math.exp(-(a[i] * t + d[i])))

    l0 = e = v = w_sum = num = den = 0.0
    terms = []
    for i in range(len(x)):
        p = prob(i, theta)
        dp = (prob(i, theta + 1e-6) - prob(i, theta - 1e-6)) / 2e-6
        w = math.log(p / (1 - p))
        l0 += math.log(p) if x[i] else math.log(1 - p)
        e += p * math.log(p) + (1 - p) * math.log(1 - p)
        v += p * (1 - p) * w**2
        r = dp / (p * (1 - p))
        num += dp * w
        den += dp * r
        w_sum += (x[i] - p) * w
        terms.append((p, w, r))
    cn = num / den
    tau2 = sum(p * (1 - p) * (w - cn * r) ** 2 for p, w, r in terms)
    return (l0 - e) / math.sqrt(v), (w_sum + cn * r0) / math.sqrt(tau2), l0, e, v


@pytest.mark.parametrize("c, s", [(0.0, 0.0), (0.2, 0.0), (0.15, 0.1)])
@pytest.mark.parametrize("prior_sd", [1.0, 2.0, np.inf])
def test_lz_and_lz_star_match_a_hand_computation(c, s, prior_sd):
    x, theta = [1, 0, 1], 0.3
    cs, ss = np.full(3, c), np.full(3, s)
    lz, lz_star, l0, e, v = _hand(x, theta, A, D, cs, ss, r0=-theta / prior_sd**2)
    got = lz_statistics(np.array(x)[:, None], [theta], A, D, cs, ss, prior_sd=prior_sd)
    assert got.l0[0] == pytest.approx(l0, rel=1e-12) and got.expected[0] == pytest.approx(e, rel=1e-12)
    assert got.variance[0] == pytest.approx(v, rel=1e-12)
    assert got.lz[0] == pytest.approx(lz, rel=1e-12)
    assert got.lz_star[0] == pytest.approx(lz_star, rel=1e-7)


def test_lz_star_at_the_estimate_is_the_residual_on_the_corrected_weights():
    """At the MAP estimate sum (x - p) r = -r0, so l_z* = sum (x - p) w~ / tau (Snijders' identity)."""
    responses, truth = simulate_pl("2pl", n_items=25, n_models=40, seed=4)
    y = responses["responses"].values
    a, d = truth["discrimination"].values, truth["intercept"].values
    theta = score_test(y, a, d, method="map").theta
    stats = lz_statistics(y, theta, a, d)
    p = 1 / (1 + np.exp(-(a[:, None] * theta + d[:, None])))
    w = a[:, None] * theta + d[:, None]
    cn = (a[:, None] * p * (1 - p) * w).sum(0) / (a[:, None] ** 2 * p * (1 - p)).sum(0)
    wt = w - cn * a[:, None]
    direct = ((y - p) * wt).sum(0) / np.sqrt((wt**2 * p * (1 - p)).sum(0))
    np.testing.assert_allclose(stats.lz_star, direct, atol=1e-6)


def test_missing_responses_are_left_out():
    y = np.array([[1, 1], [0, -1], [1, 1]], dtype=np.int8)
    full = lz_statistics(y, [0.2, 0.2], A, D)
    dropped = lz_statistics(y[[0, 2], 1:], [0.2], A[[0, 2]], D[[0, 2]])
    for got, want in zip(full, dropped):
        assert got[1] == pytest.approx(want[0], rel=1e-12)


def test_null_moments_equal_exact_enumeration_and_lz_star_corrects_them():
    n = 10
    a, b = np.linspace(0.6, 2.2, n), np.linspace(-1.5, 1.5, n)
    d = -a * b
    patterns = np.array(list(itertools.product([0, 1], repeat=n)), dtype=np.int8).T  # all 1,024
    estimate = score_test(patterns, a, d, method="map").theta
    for theta in (-1.0, 0.0, 0.8, 1.5):
        p = 1 / (1 + np.exp(-(a * theta + d)))
        weight = np.prod(np.where(patterns == 1, p[:, None], 1 - p[:, None]), axis=0)
        at_truth = lz_statistics(patterns, np.full(patterns.shape[1], theta), a, d)
        mean = weight @ at_truth.l0
        assert at_truth.expected[0] == pytest.approx(mean, rel=1e-12)
        assert at_truth.variance[0] == pytest.approx(weight @ (at_truth.l0 - mean) ** 2, rel=1e-12)
        plug_in = lz_statistics(patterns, estimate, a, d)
        moments = {k: (weight @ v, weight @ (v - weight @ v) ** 2) for k, v in
                   (("lz", plug_in.lz), ("lz_star", plug_in.lz_star))}
        assert abs(moments["lz_star"][0]) < abs(moments["lz"][0])
        assert abs(moments["lz_star"][1] - 1) < abs(moments["lz"][1] - 1)


@pytest.fixture(scope="module")
def cohort():
    """A genuine 2PL cohort, its MML calibration and reversed-Guttman patterns of 200 models."""
    genuine, _ = simulate_pl("2pl", n_items=40, n_models=600, seed=11)
    items = fit_mml(genuine, "2pl", priors=True, se=False).items
    source, _ = simulate_pl("2pl", n_items=40, n_models=200, seed=12)
    y = source["responses"].values
    score = np.clip(y.sum(0), 1, 39)
    hardest_first = np.argsort(items["intercept"].values)  # lowest intercept = hardest
    rank = np.empty(40, dtype=int)
    rank[hardest_first] = np.arange(40)
    reversed_guttman = (rank[:, None] < score[None, :]).astype(np.int8)
    aberrant = make_responses(reversed_guttman, item_id=genuine["item"].values,
                              model_id=[f"r{k:03d}" for k in range(200)])
    return genuine, items, aberrant


@pytest.mark.parametrize("statistic", ["lz", "lz_star"])
def test_reversed_guttman_patterns_are_detected_at_the_calibrated_cutoff(cohort, statistic):
    genuine, items, aberrant = cohort
    base = person_fit(genuine, items)
    cutoff = calibrate_cutoff(base[statistic].values, fpr=0.1)
    flagged = person_fit(aberrant, items)[statistic].values <= cutoff
    assert (base[statistic].values <= cutoff).mean() <= 0.1
    assert flagged.mean() > 0.8
    assert roc_auc(base[statistic].values, person_fit(aberrant, items)[statistic].values) > 0.9


@pytest.mark.parametrize("fpr", [0.01, 0.05, 0.1, 0.25])
def test_cutoff_achieves_the_nominal_false_positive_rate(cohort, fpr):
    genuine, items, _ = cohort
    values = person_fit(genuine, items)["lz"].values
    rate = (values <= calibrate_cutoff(values, fpr=fpr)).mean()
    assert fpr - 1 / values.size < rate <= fpr


def test_cutoff_steps_below_ties_and_ignores_nan():
    values = [0.0, 1.0, 1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, np.nan]
    assert calibrate_cutoff(values, fpr=0.2) == 0.0  # the 2nd smallest (1.0) is tied with larger values
    assert calibrate_cutoff(values, fpr=0.5) == 1.0  # 9 finite values: the 4th smallest, 4 flagged
    assert calibrate_cutoff(values, fpr=0.6) == 2.0  # the 5th smallest
    assert calibrate_cutoff([1.0] * 10, fpr=0.1) == -np.inf


def test_roc_curve_against_a_hand_count():
    genuine, aberrant = [0.0, 1.0, 2.0, 3.0], [-1.0, 0.5, 2.5]
    roc = roc_curve(genuine, aberrant)
    for row in roc.itertuples():
        if np.isfinite(row.threshold):
            assert row.fpr == np.mean(np.array(genuine) <= row.threshold)
            assert row.tpr == np.mean(np.array(aberrant) <= row.threshold)
    assert roc_auc(genuine, aberrant) == pytest.approx(np.mean([[a < g for g in genuine] for a in aberrant]))


def _exact_theta_posterior(responses, truth, draws, seed):
    """Posterior draws of theta on a fine grid at the true item parameters (an exact posterior)."""
    nodes, logw = ability_grid(801)
    bank = item_bank(truth["discrimination"].values, truth["intercept"].values)
    post = np.exp(grid_log_posterior(responses["responses"].values, bank, nodes, logw))
    cdf = np.cumsum(post, axis=1)
    u = np.random.default_rng(seed).random((draws, post.shape[0]))
    theta = nodes[np.minimum((cdf[None, :, :] < u[:, :, None]).sum(-1), nodes.size - 1)]
    rep = lambda v: np.broadcast_to(v, (1, draws, v.size))  # noqa: E731
    ds = xr.Dataset({"theta": (("chain", "draw", "model"), theta[None]),
                     "discrimination": (("chain", "draw", "item"), rep(bank.discrimination)),
                     "intercept": (("chain", "draw", "item"), rep(bank.intercept))},
                    coords={"item": responses["item"].values, "model": responses["model"].values})
    return xr.DataTree.from_dict({"posterior": ds, "observed_data": responses[["responses"]]})


def test_posterior_predictive_pvalues_uniform_for_fitting_and_small_for_aberrant_models():
    responses, truth = simulate_pl("2pl", n_items=30, n_models=400, seed=21)
    y = responses["responses"].values
    order = np.argsort(truth["intercept"].values)  # hardest first
    aberrant = np.zeros((30, 40), dtype=np.int8)
    for k, score in enumerate(np.linspace(8, 22, 40).astype(int)):
        aberrant[order[:score], k] = 1
    data = make_responses(np.concatenate([y, aberrant], axis=1), item_id=responses["item"].values,
                          model_id=[*responses["model"].values, *[f"r{k:02d}" for k in range(40)]])
    tree = _exact_theta_posterior(data, truth, draws=400, seed=1)
    ppp = posterior_predictive_person_fit(tree, draws=400, seed=2)["ppp"].values
    fitting, odd = ppp[:400], ppp[400:]
    assert abs(fitting.mean() - 0.5) < 0.05
    assert np.mean(fitting < 0.05) <= 0.05 and np.mean(fitting < 0.25) > 0.1  # conservative, yet spread
    assert np.mean(odd < 0.05) > 0.9
    again = posterior_predictive_person_fit(tree, draws=400, seed=2)["ppp"].values
    np.testing.assert_array_equal(ppp, again)


def test_job_writes_every_file(tmp_path, cohort):
    genuine, items, _ = cohort
    small = genuine.isel(model=slice(0, 200))
    truth = xr.Dataset({"discrimination": ("item", items["discrimination"].values),
                        "intercept": ("item", items["intercept"].values)}, coords={"item": items["item"].values})
    tree = _exact_theta_posterior(small, truth, draws=50, seed=3)
    tree.to_netcdf(tmp_path / "posterior.nc", engine="h5netcdf")
    out = run_personfit_job(small, tmp_path / "pf", fpr=0.1, statistic="lz_star", posterior=tmp_path / "posterior.nc",
                            ppp_draws=50, progress=False)
    names = {p.name for p in out.iterdir()}
    assert names == {"personfit.nc", "models.csv", "items.csv", "summary.json", "report.md", "lz.png"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["statistic"] == "lz_star" and summary["flagged"] <= 20
    saved = xr.open_datatree(out / "personfit.nc", engine="h5netcdf")
    assert {"lz", "lz_star", "ppp", "flagged"} <= set(saved["models"].data_vars)
    assert "Posterior predictive person fit" in (out / "report.md").read_text()
    with pytest.raises(OutputError, match="already exists"):
        run_personfit_job(small, out)


def test_misfit_spread_rule_by_hand():
    """Widespread when the cohort's fpr point lies below the N(0, 1) fpr/10 point."""
    fitting = np.random.default_rng(0).normal(size=1000)
    spread = misfit_spread(fitting, calibrate_cutoff(fitting, fpr=0.1), fpr=0.1)
    assert not spread["widespread"] and spread["widespread_below"] == pytest.approx(-2.3263, abs=1e-4)
    assert spread["nominal_quantile"] == pytest.approx(-1.2816, abs=1e-4)
    assert spread["share_below_nominal_1pct"] == pytest.approx(np.mean(fitting <= -2.3263479), abs=1e-12)
    poor = np.r_[fitting[:800], np.full(200, -6.0)]  # a fifth tied far out: the cut-off steps below them, to -inf
    assert misfit_spread(poor, calibrate_cutoff(poor, fpr=0.1), fpr=0.1)["widespread"]
    assert misfit_spread(fitting, -2.33, fpr=0.1)["widespread"] and not misfit_spread(fitting, -2.32, fpr=0.1)["widespread"]
    assert misfit_spread(fitting, -2.0, fpr=0.05)["widespread_below"] == pytest.approx(-2.5758, abs=1e-4)
    assert not misfit_spread([np.nan] * 3, float("nan"))["widespread"]


def _family_shifted(sd: float) -> xr.Dataset:
    """A 2PL cohort of 300 models x 200 items in which half the models (a "family") find each item
    easier or harder by its own N(0, sd^2) logits: for sd = 2.5 one 2PL fits neither half."""
    rng = np.random.default_rng(0)
    theta, a, d = rng.normal(size=300), rng.lognormal(0, 0.3, 200), rng.normal(size=200)
    shift = np.where(np.arange(300)[None, :] < 150, rng.normal(0, sd, 200)[:, None], 0.0)
    y = rng.random((200, 300)) < 1 / (1 + np.exp(-(a[:, None] * theta[None, :] + d[:, None] + shift)))
    return make_responses(y.astype(np.int8))


@pytest.mark.parametrize("sd, widespread", [(2.5, True), (0.0, False)])
def test_job_report_says_when_misfit_is_widespread(tmp_path, sd, widespread):
    """Family-shifted items: the calibrated cut-off lies far below -2.33 and the report says that
    misfit is widespread and the cut-off relative; a clean 2PL cohort's report does not."""
    out = run_personfit_job(_family_shifted(sd), tmp_path / "pf", fpr=0.1, progress=False)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["misfit_spread"]["widespread"] is widespread
    assert (summary["cutoff"] < summary["misfit_spread"]["widespread_below"]) is widespread
    report = (out / "report.md").read_text()
    assert ("Misfit is widespread in this cohort" in report) is widespread
    assert ("poorly, so the cut-off is relative" in report) is widespread
    assert "by construction" in report and ("Misfit is not widespread" in report) is not widespread


def test_error_messages(tmp_path, cohort):
    genuine, items, _ = cohort
    y = genuine["responses"].values
    with pytest.raises(BayesIRTError, match=r"shape \(n_items, n_models\) = \(3, 1\)"):
        lz_statistics(np.ones((2, 1)), [0.0], A, D)
    with pytest.raises(ConfigError, match=r"The 'prior_sd' parameter of lz_statistics must be a positive number \(np.inf for ML\); got 0.0."):
        lz_statistics(np.ones((3, 1)), [0.0], A, D, prior_sd=0.0)
    with pytest.raises(DataError, match="must be a response Dataset"):
        check_responses(y)
    with pytest.raises(DataError, match="expected \\('item', 'model'\\)"):
        check_responses(xr.Dataset({"responses": (("a", "b"), y)}))
    with pytest.raises(BayesIRTError, match="'discrimination' and 'intercept'"):
        item_parameters(items[["intercept"]], genuine["item"].values)
    with pytest.raises(BayesIRTError, match="lacks parameters for 1 item"):
        item_parameters(items.isel(item=slice(1, None)), genuine["item"].values)
    with pytest.raises(ConfigError, match="The 'prior_sd' parameter of person_fit must be a number > 0; got inf."):
        person_fit(genuine, items, prior_sd=np.inf)
    with pytest.raises(ConfigError, match=r"The 'fpr' parameter of calibrate_cutoff must be a number in \(0, 1\); got 1.5."):
        calibrate_cutoff([1.0, 2.0], fpr=1.5)
    with pytest.raises(DataError, match="needs at least 10 genuine models"):
        calibrate_cutoff([1.0, 2.0, np.nan], fpr=0.1)
    with pytest.raises(BayesIRTError, match="finite genuine and aberrant values; got 2 and 0"):
        roc_curve([1.0, 2.0], [np.nan])
    with pytest.raises(BayesIRTError, match="finite genuine and aberrant"):
        roc_auc([], [1.0])
    with pytest.raises(BayesIRTError, match="DataTree with a 'posterior' group"):
        posterior_predictive_person_fit(xr.DataTree())
    tree = _exact_theta_posterior(genuine.isel(model=slice(0, 20)), items, draws=5, seed=0)
    with pytest.raises(BayesIRTError, match=r"lacks \['theta'\]"):
        posterior_predictive_person_fit(xr.DataTree.from_dict({"posterior": tree["posterior"].to_dataset().drop_vars(
            "theta")}))
    with pytest.raises(BayesIRTError, match="no observed_data group; pass the responses"):
        posterior_predictive_person_fit(xr.DataTree.from_dict({"posterior": tree["posterior"].to_dataset()}))
    with pytest.raises(BayesIRTError, match="do not cover the posterior's items and models"):
        posterior_predictive_person_fit(tree, responses=genuine.isel(model=slice(20, 40)))
    with pytest.raises(ConfigError, match="The 'draws' parameter of posterior_predictive_person_fit must be a positive integer; got 0."):
        posterior_predictive_person_fit(tree, draws=0)
    with pytest.raises(BayesIRTError, match="'statistic' parameter of \w+ must be one of"):
        run_personfit_job(genuine, tmp_path / "x", statistic="zh")
    (tmp_path / "bad.nc").write_text("not netcdf")
    with pytest.raises(BayesIRTError, match="cannot read the posterior"):
        run_personfit_job(genuine, tmp_path / "y", posterior=tmp_path / "bad.nc")
