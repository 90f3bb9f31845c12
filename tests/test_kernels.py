"""The fused logistic log-likelihood kernel (``bayesirt.models.kernels``) against its oracle, the
PyTensor graph it replaces (``fused_loglik`` over the dense matrix): value and gradient, in the
numba backend nutpie uses and through ``perform``, on random points, missing cells, logits far in
both tails and the whole 1PL/2PL model; and which fits use it (nutpie samples with it in every NUTS
test of ``fit``)."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from bayesirt.data import simulate_pl
from bayesirt.models.kernels import LogisticLoglik, loglik_and_gradient, logistic_loglik
from bayesirt.models.logistic import build_logistic, fused_loglik
from bayesirt.models.specs import load_spec


def _uses_kernel(model) -> bool:
    from pytensor.graph.traversal import apply_ancestors

    return any(isinstance(node.op, LogisticLoglik) for node in apply_ancestors([model.potentials[0]]))


def _graphs(y, by_model=None):
    """(kernel, oracle): log-likelihood of y under logit a_i t_m + d_i, as functions of (a, t, d)."""
    a, t, d = pt.dvector("a"), pt.dvector("t"), pt.dvector("d")
    observed = y >= 0
    kernel = logistic_loglik(a, t, d, y, by_model=by_model)
    oracle = fused_loglik(a[:, None] * t[None, :] + d[:, None], None, None, (y == 1).astype("float64"), observed)
    return (a, t, d), kernel, oracle


def _compile(inputs, out, mode):
    return pytensor.function(list(inputs), [out, *pytensor.grad(out, list(inputs))], mode=mode)


def _responses(rng, n_items, n_models, missing=0.0):
    y = (rng.random((n_items, n_models)) < 0.6).astype(np.int8)
    y[rng.random(y.shape) < missing] = -1
    return y


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])  # FAST_COMPILE runs the Op's perform
@pytest.mark.parametrize("missing", [0.0, 0.3])
@pytest.mark.parametrize("shape", [(7, 5), (40, 33), (3, 70)])  # rows below/above a renormalization (16)
@pytest.mark.parametrize("by_model", [False, True])
def test_value_and_gradient_match_the_pytensor_graph(mode, missing, shape, by_model):
    rng = np.random.default_rng(sum(shape) + int(10 * missing))
    y = _responses(rng, *shape, missing)
    inputs, kernel, oracle = _graphs(y, by_model)
    got, want = _compile(inputs, kernel, mode), _compile(inputs, oracle, mode)
    for _ in range(3):
        point = [rng.lognormal(0, 0.6, shape[0]), rng.normal(0, 1.5, shape[1]), rng.normal(0, 2, shape[0])]
        for g, w in zip(got(*point), want(*point)):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("by_model", [False, True])
def test_tails_and_extreme_logits(by_model):
    """Logits from -2,000 to 2,000 (past the clipping at -700 and 36): finite, and equal to the graph's.
    50 rows: the per-column products of 1 + exp(eta) (up to 4.3e15 each) pass several renormalizations."""
    rng = np.random.default_rng(3)
    y = _responses(rng, 50, 40, missing=0.1)
    inputs, kernel, oracle = _graphs(y, by_model)
    got, want = _compile(inputs, kernel, "NUMBA"), _compile(inputs, oracle, "NUMBA")
    a = np.resize([0.01, 1.0, 10.0, 30.0, 60.0, 100.0], 50)
    t = np.linspace(-20, 20, 40)
    for shift in (-1000.0, -30.0, 0.0, 30.0, 1000.0):
        point = [a, t, np.full(50, shift)]
        out_got, out_want = got(*point), want(*point)
        assert all(np.all(np.isfinite(v)) for v in out_got)
        np.testing.assert_allclose(out_got[0], out_want[0], rtol=1e-12)
        for g, w in zip(out_got[1:], out_want[1:]):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-9)


def test_non_finite_positions_give_a_non_finite_log_likelihood():
    """A NaN or infinite parameter must not be hidden by the clipping: the sampler has to see it."""
    y = np.array([[1, 0, 1], [0, 1, -1]], dtype=np.int8)
    for bad in (np.nan, np.inf, -np.inf):
        a, t = np.array([1.0, bad]), np.array([0.1, 0.2, -0.3])
        assert not np.isfinite(loglik_and_gradient(a, t, np.zeros(2), y)[0])
        assert not np.isfinite(loglik_and_gradient(a, t, np.zeros(2), np.ascontiguousarray(y.T), True)[0])


def test_second_derivatives_raise():
    y = np.array([[1, 0], [0, 1]], dtype=np.int8)
    a, t, d = pt.dvector("a"), pt.dvector("t"), pt.dvector("d")
    _, ga, _, _ = LogisticLoglik(by_model=False)(a, t, d, pytensor.shared(y))
    with pytest.raises(Exception, match="second derivatives"):
        pytensor.grad(ga.sum(), a)


@pytest.mark.parametrize("name", ["2pl", "rasch"])
@pytest.mark.parametrize("missing", [0.0, 0.1])
@pytest.mark.slow
def test_whole_model_logp_and_gradient_match_the_graph(name, missing):
    """build_logistic(fused_kernel=True) against the default graph: the model's logp and gradient
    (priors, reparameterization and Jacobians included) at random unconstrained points."""
    responses, _ = simulate_pl("2pl" if name == "2pl" else "1pl", n_items=30, n_models=25, seed=4, missing=missing)
    spec = load_spec(name)
    kernel, graph = build_logistic(responses, spec, fused_kernel=True), build_logistic(responses, spec)
    assert _uses_kernel(kernel) and not _uses_kernel(graph)
    f_kernel = kernel.logp_dlogp_function(ravel_inputs=True)
    f_graph = graph.logp_dlogp_function(ravel_inputs=True)
    f_kernel.set_extra_values({})
    f_graph.set_extra_values({})
    rng = np.random.default_rng(5)
    n = sum(int(np.size(v)) for v in kernel.initial_point().values())
    for _ in range(3):
        x = rng.normal(0, 0.7, n)
        (lp_k, g_k), (lp_g, g_g) = f_kernel(x), f_graph(x)
        np.testing.assert_allclose(lp_k, lp_g, rtol=1e-12)
        np.testing.assert_allclose(g_k, g_g, rtol=1e-10, atol=1e-10)


def test_kernel_not_used_with_asymptotes_or_minibatches():
    """3PL/4PL and minibatch ADVI keep the graph (the kernel covers the dense 1PL/2PL only)."""
    responses, _ = simulate_pl("3pl", n_items=10, n_models=12, seed=6)
    assert not _uses_kernel(build_logistic(responses, load_spec("3pl"), fused_kernel=True))
    assert not _uses_kernel(build_logistic(responses, load_spec("2pl"), fused_kernel=True, batch_size=40))
    assert _uses_kernel(build_logistic(responses, load_spec("2pl"), fused_kernel=True))


@pytest.mark.parametrize(("method", "sampler", "expected"), [("nuts", "nutpie", True), ("nuts", "pymc", False),
                                                           ("advi", "nutpie", False)])
def test_fit_asks_for_the_kernel_with_nutpie_only(monkeypatch, method, sampler, expected):
    """fit builds the model with fused_kernel=True for NUTS with nutpie (its fits run in the fit tests) when
    the direct nutpie model (bayesirt.inference.nutpie_direct, which calls the kernel itself) does not apply."""
    import bayesirt.inference.fitting as fitting

    seen = {}
    monkeypatch.setattr("bayesirt.inference.nutpie_direct.direct_eligible", lambda responses, spec: False)

    class Stop(Exception):
        pass

    def spy(responses, spec, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr("bayesirt.models.logistic.build_logistic", spy)
    responses, _ = simulate_pl("2pl", n_items=5, n_models=6, seed=1)
    with pytest.raises(Stop):
        fitting.fit(responses, "2pl", method=method, sampler=sampler)
    assert seen["fused_kernel"] is expected


def test_kernel_releases_the_gil():
    """Python threads that call the kernel (``loglik_and_gradient``, or the Op's ``perform``) run it in
    parallel: it holds no GIL. (nutpie's chains call it from a C callback, without Python.)"""
    from bayesirt.models import kernels

    assert loglik_and_gradient.targetoptions.get("nogil") is True
    assert kernels._row_kernel.targetoptions.get("nogil") is True


@pytest.mark.slow
def test_kernel_asks_for_512_bit_vectors():
    """The kernel's function carries LLVM's ``"prefer-vector-width"="512"``, which lets the loop use
    AVX-512 registers where the CPU has them (LLVM's tuning otherwise stops at 256 bits); a function
    without the call has no such attribute. Results do not depend on it: the kernel's value and gradient
    tests above run with it. (The kernel is compiled afresh here: numba cannot show the code of a cached
    build.)"""
    import numba

    from bayesirt.models import kernels

    kernel = numba.njit(error_model="numpy")(kernels._row_kernel.py_func)
    kernel(np.ones(3), np.ones(4), np.zeros(3), np.zeros((3, 4), dtype=np.int8), True)

    @numba.njit
    def plain(x):
        return x + 1.0

    plain(1.0)
    assert '"prefer-vector-width"="512"' in next(iter(kernel.inspect_llvm().values()))
    assert "prefer-vector-width" not in next(iter(plain.inspect_llvm().values()))


def test_a_float32_slope_does_not_round_the_rest():
    """The Op computes in the widest input dtype: a float32 constant slope (the 1PL's) once cast the
    abilities and intercepts to float32 (gradients off by 1e-7 relative)."""
    rng = np.random.default_rng(7)
    y = (rng.random((6, 5)) < 0.5).astype(np.int8)
    t, d = rng.normal(size=5), rng.normal(size=6)
    a32 = pt.constant(np.ones(6, dtype=np.float32))
    total = logistic_loglik(a32, pt.constant(t), pt.constant(d), y)
    assert total.dtype == "float64"
    want = loglik_and_gradient(np.ones(6), t, d, y)[0]
    np.testing.assert_allclose(total.eval(), want, rtol=1e-14)
