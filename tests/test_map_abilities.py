"""MAP abilities given MML items are computed in blocks of models (bounded memory at leaderboard
size): the blocks give the numbers of one pass over all models, up to rounding."""

import numpy as np

from bayesirt.frequentist import abilities
from bayesirt.frequentist.mml_model import ItemParameters, ResponsePatterns


def _data(seed=0, n_items=40, n_models=57):
    rng = np.random.default_rng(seed)
    a, d = rng.lognormal(0, 0.4, n_items), rng.normal(0, 1, n_items)
    theta = rng.normal(0, 1, n_models)
    y = (rng.random((n_items, n_models)) < 1 / (1 + np.exp(-(a[:, None] * theta + d[:, None])))).astype(float)
    observed = rng.random((n_items, n_models)) > 0.2
    y1, y0 = np.where(observed, y, 0.0), np.where(observed, 1 - y, 0.0)
    zeros = np.zeros(n_items)
    return ResponsePatterns(y1, y0, np.ones(n_models), np.zeros(1), np.zeros(1), False), \
        ItemParameters(a, d, zeros, zeros), theta


def test_blocks_of_models_equal_one_pass(monkeypatch):
    data, par, theta = _data()
    start = np.zeros(theta.size)
    whole = abilities.map_abilities(data, par, 0.0, 1.0, start)
    monkeypatch.setattr(abilities, "MAP_BLOCK_CELLS", 3 * 40)  # blocks of 3 models, the last of 0 < 3
    blocked = abilities.map_abilities(data, par, 0.0, 1.0, start)
    # equal up to rounding: NumPy's vectorized exp treats a row's tail elements apart, so 1 ulp may differ
    np.testing.assert_allclose(blocked[0], whole[0], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(blocked[1], whole[1], rtol=1e-13, atol=1e-15)
    assert np.corrcoef(whole[0], theta)[0, 1] > 0.8  # and they are abilities
    # the MAP is the root of the score: posterior gradient ~ 0 at every model
    eps = 1e-6
    for m in (0, 10, 56):
        def logpost(t):
            eta = par.a * t + par.d
            return (data.y1[:, m] * -np.logaddexp(0, -eta) + data.y0[:, m] * -np.logaddexp(0, eta)).sum() - t**2 / 2
        assert abs(logpost(whole[0][m] + eps) - logpost(whole[0][m] - eps)) / (2 * eps) < 1e-5
