"""Fisher information: closed forms against numerical second derivatives of the log-likelihood,
labelled curves, posterior-averaged curves, and every bad-input message."""

import numpy as np
import pytest
import xarray as xr
from scipy.special import expit

from bayesirt.errors import BayesIRTError
from bayesirt.models.information import (
    THETA_GRID,
    information_curves,
    item_bank,
    item_information,
    mean_item_information,
    posterior_information,
    test_information,
)

KINDS = {  # a, d, c, s per item
    "1pl": ([1.0, 1.0, 1.0], [-1.0, 0.3, 2.0], 0.0, 0.0),
    "2pl": ([0.4, 1.3, 2.5], [0.5, -1.0, 1.5], 0.0, 0.0),
    "3pl": ([0.8, 1.7, 2.2], [0.0, -0.7, 1.1], [0.2, 0.1, 0.25], 0.0),
    "4pl": ([0.9, 1.5, 2.4], [0.4, -1.2, 0.8], [0.15, 0.05, 0.2], [0.1, 0.2, 0.05]),
}


def _loglik(theta, a, d, c, s, y):
    p = c + (1 - c - s) * expit(a * theta + d)
    return np.log(p) if y == 1 else np.log1p(-p)


@pytest.mark.parametrize("kind", KINDS)
def test_information_is_expected_negative_second_derivative(kind):
    a, d, c, s = (np.broadcast_to(np.asarray(v, float), (3,)) for v in KINDS[kind])
    theta = np.array([-2.5, -0.4, 0.0, 1.3, 3.0])
    info = item_information(theta, a, d, c, s)
    h = 1e-4
    for j in range(3):
        for m, t in enumerate(theta):
            p = c[j] + (1 - c[j] - s[j]) * expit(a[j] * t + d[j])
            expected = 0.0
            for y, w in ((1, p), (0, 1 - p)):
                f = [_loglik(t + k * h, a[j], d[j], c[j], s[j], y) for k in (-1, 0, 1)]
                expected -= w * (f[0] - 2 * f[1] + f[2]) / h**2
            assert info[j, m] == pytest.approx(expected, rel=1e-5, abs=1e-7)  # quotient roundoff ~1e-8


def test_test_information_sums_items_and_2pl_closed_form():
    a, d = np.array([0.5, 1.0, 2.0]), np.array([0.0, 1.0, -1.0])
    theta = np.linspace(-3, 3, 7)
    p = expit(a[:, None] * theta + d[:, None])
    np.testing.assert_allclose(item_information(theta, a, d), a[:, None] ** 2 * p * (1 - p), rtol=1e-12)
    np.testing.assert_allclose(test_information(theta, a, d), item_information(theta, a, d).sum(0), rtol=1e-12)
    assert (item_information(np.array([-60.0, 60.0]), a, d) >= 0).all()


def _items(n=5, groups=("x", "x", "y", "y", "y")):
    rng = np.random.default_rng(3)
    return xr.Dataset({"discrimination": ("item", rng.lognormal(0, 0.4, n)),
                       "intercept": ("item", rng.normal(0, 1, n))},
                      coords={"item": [f"i{j}" for j in range(n)], "item_group": ("item", list(groups))})


def test_information_curves_labels_groups_and_se():
    items = _items()
    ds = information_curves(items, theta=[-1.0, 0.0, 2.0])
    np.testing.assert_allclose(ds["item_information"].values,
                               item_information([-1.0, 0.0, 2.0], items["discrimination"], items["intercept"]))
    np.testing.assert_allclose(ds["group_information"].sum("group"), ds["test_information"])
    np.testing.assert_allclose(ds["standard_error"], 1 / np.sqrt(ds["test_information"]))
    assert list(ds["item_group"].values) == ["x", "x", "y", "y", "y"]
    assert information_curves(items).sizes["theta"] == THETA_GRID.size


def _tree(n_items=4, chains=2, draws=5, guessing=False, common_slope=False):
    rng = np.random.default_rng(0)
    shape = (chains, draws, n_items)
    post = {"intercept": (("chain", "draw", "item"), rng.normal(0, 1, shape)),
            "discrimination": ((("chain", "draw") if common_slope else ("chain", "draw", "item")),
                               rng.lognormal(0, 0.3, shape[:2] if common_slope else shape))}
    if guessing:
        post["guessing"] = (("chain", "draw", "item"), rng.uniform(0, 0.3, shape))
    ds = xr.Dataset(post, coords={"chain": range(chains), "draw": range(draws),
                                  "item": [f"i{j}" for j in range(n_items)]})
    return xr.DataTree.from_dict({"posterior": ds})


@pytest.mark.parametrize("guessing, common_slope", [(False, False), (True, False), (False, True)])
def test_posterior_information_averages_draws(guessing, common_slope):
    tree = _tree(guessing=guessing, common_slope=common_slope)
    post = tree["posterior"].to_dataset()
    theta = np.array([-1.0, 0.5])
    a = post["discrimination"].broadcast_like(post["intercept"]).values.reshape(-1, 4)
    c = post["guessing"].values.reshape(-1, 4) if guessing else 0.0
    manual = item_information(theta, a, post["intercept"].values.reshape(-1, 4), c)  # (draws, item, theta)
    ds = posterior_information(tree, theta, chunk=3)
    np.testing.assert_allclose(ds["item_information"].values, manual.mean(0), rtol=1e-12)
    np.testing.assert_allclose(ds["test_information_sd"].values, manual.sum(1).std(0, ddof=1), rtol=1e-10)
    again = posterior_information(tree, theta, chunk=64)
    np.testing.assert_allclose(again["item_information"], ds["item_information"], rtol=1e-12)
    assert posterior_information(tree, theta, max_draws=4).attrs["draws"] == 4


def test_posterior_information_blocks_bounded_in_cells(monkeypatch):
    """With BLOCK_CELLS below one draw's item x theta cells, blocks of one draw give the same curves."""
    import bayesirt.models.information as information  # the module, to lower its block size

    tree = _tree(guessing=True)
    theta = np.linspace(-2.0, 2.0, 7)
    whole = posterior_information(tree, theta)
    monkeypatch.setattr(information, "BLOCK_CELLS", 5)  # 4 items x 7 abilities per draw > 5: one draw per block
    blocked = posterior_information(tree, theta)
    np.testing.assert_allclose(blocked["item_information"], whole["item_information"], rtol=1e-12)
    np.testing.assert_allclose(blocked["test_information_sd"], whole["test_information_sd"], rtol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
def test_mean_item_information_equals_the_full_array_mean(kind):
    """The compiled average over draws and models against the (draw, item, model) array it replaces,
    with abilities far enough out that some cells underflow to zero information."""
    rng = np.random.default_rng(3)
    a0, d0, c0, s0 = (np.broadcast_to(np.asarray(x, float), (3,)) for x in KINDS[kind])
    draws = 6
    theta = rng.normal(0, 2, (draws, 9))
    theta[0, :3] = [-80.0, 80.0, -900.0]  # the last past the cap of |eta| at 700
    jitter = rng.normal(0, 0.1, (draws, 3))
    a = a0 * np.exp(jitter) if kind != "1pl" else np.full((draws, 1), 1.3)
    d, c, s = d0 + jitter, c0 * np.exp(jitter / 4), s0 * np.exp(-jitter / 4)
    oracle = item_information(theta, a, d, c, s).mean(axis=(0, 2))
    np.testing.assert_allclose(mean_item_information(theta, a, d, c, s), oracle, rtol=1e-12, atol=0)
    np.testing.assert_allclose(mean_item_information(theta, a, d), item_information(theta, a, d).mean(axis=(0, 2)),
                               rtol=1e-12, atol=0)
    # one draw, one model: the closed form a^2 P (1 - P) of the 2PL by hand
    p = expit(0.7 * 0.2 - 0.1)
    np.testing.assert_allclose(mean_item_information([[0.2]], [[0.7]], [[-0.1]]), [0.49 * p * (1 - p)], rtol=1e-14)


def test_posterior_information_by_item_group_from_constant_data():
    """A fit keeps item_group in constant_data (not on the posterior): the group curves use it."""
    tree = _tree()
    tree["constant_data"] = xr.DataTree(xr.Dataset({"item_group": ("item", ["x", "x", "y", "y"])},
                                                   coords={"item": tree["posterior"]["item"].values}))
    ds = posterior_information(tree, np.array([-1.0, 0.5]))
    assert list(ds["group"].values) == ["x", "y"]
    np.testing.assert_allclose(ds["group_information"].sel(group="x"), ds["item_information"][:2].sum("item"))
    assert "group_information" not in posterior_information(_tree(), np.array([0.0]))


def test_item_bank_broadcasts_scalars():
    bank = item_bank([1.0, 2.0], 0.5, guessing=0.1)
    assert bank.n_items == 2 and bank.intercept.tolist() == [0.5, 0.5] and bank.slip.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("args, match", [
    (([[1.0, 2.0]], [0.0, 0.0]), "discrimination must be a scalar or 1-D over items"),
    (([1.0, 2.0], [0.0, 0.0, 1.0]), "item parameters have different lengths"),
    (([1.0, np.nan], [0.0, 0.0]), "discrimination contains non-finite values"),
    ((1.0, 0.0), "item parameters are all scalars"),
    (([], []), "the item bank is empty"),
    (([1.0], [0.0], 0.6, 0.5), "asymptotes must satisfy"),
    (([1.0], [0.0], -0.1), "asymptotes must satisfy"),
])
def test_item_bank_errors(args, match):
    with pytest.raises(BayesIRTError, match=match):
        item_bank(*args)


def test_curve_errors():
    with pytest.raises(BayesIRTError, match="items needs dim 'item' and variables"):
        information_curves(xr.Dataset({"discrimination": ("item", [1.0])}))
    with pytest.raises(BayesIRTError, match="theta must be a non-empty 1-D array"):
        information_curves(_items(), theta=[[0.0]])
    with pytest.raises(BayesIRTError, match="theta must be a non-empty 1-D array"):
        information_curves(_items(), theta=[np.inf])
    with pytest.raises(BayesIRTError, match="must be a DataTree with a 'posterior' group"):
        posterior_information(_items())
    bad = xr.DataTree.from_dict({"posterior": _tree()["posterior"].to_dataset().drop_vars("intercept")})
    with pytest.raises(BayesIRTError, match="the posterior lacks"):
        posterior_information(bad)
