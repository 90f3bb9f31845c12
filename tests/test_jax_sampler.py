"""PyMC's JAX samplers (sampler="numpyro" | "blackjax", the optional extra bayesirt[jax]) against nutpie
on one small 2PL: the same DataTree layout, posterior means within Monte Carlo error of nutpie's, the
same draws from the same seed; and, without JAX, the one-line install hint (those tests need no JAX)."""

import importlib.util
import json
import sys
from pathlib import Path

import arviz as az
import numpy as np
import pytest
import xarray as xr

from bayesirt.cli.main import main
from bayesirt.data import simulate_pl
from bayesirt.errors import BayesIRTError
from bayesirt.inference.fitting import fit, sample_model

SAMPLE = ("chain", "draw")
RUN = {"draws": 500, "tune": 500, "chains": 2, "progress": False}
HINT = 'install with `pip install "bayesirt[jax]"`.'


def _hint(caller, sampler, missing):
    return (f"The 'sampler' parameter of {caller} is {sampler!r}, which needs the optional JAX packages "
            f"({missing} is not installed): {HINT}")


@pytest.fixture(scope="module")
def responses():
    return simulate_pl("2pl", n_items=8, n_models=30, seed=21)[0]


@pytest.fixture(scope="module")
def nutpie_fit(responses):
    return fit(responses, "2pl", seed=5, **RUN)


@pytest.fixture(scope="module", params=["numpyro", "blackjax"])
def jax_fits(request, responses):
    """Two fits with the same seed. Each compiles afresh (about 20 s of XLA compilation here)."""
    pytest.importorskip("jax")
    pytest.importorskip(request.param)
    first, again = (fit(responses, "2pl", sampler=request.param, seed=5, **RUN) for _ in range(2))
    return request.param, first, again


@pytest.mark.slow
def test_same_layout_as_nutpie(jax_fits, nutpie_fit):
    sampler, tree, _ = jax_fits
    post, ref = tree.posterior, nutpie_fit.posterior
    assert set(tree.children) == set(nutpie_fit.children)
    assert set(post.data_vars) == set(ref.data_vars)
    # a slope-intercept 2PL reports theta, a and d (b = -d / a is derived: with_difficulty)
    assert set(post.data_vars) == {"theta", "discrimination", "intercept"}
    for name in ref.data_vars:
        assert post[name].dims == ref[name].dims and post[name].shape == ref[name].shape
        assert post[name].dtype == ref[name].dtype
    xr.testing.assert_equal(post.coords.to_dataset(), ref.coords.to_dataset())  # attrs: each sampler's own
    stats = tree["sample_stats"]
    assert {"diverging", "energy"} <= set(stats.data_vars)  # what bayesirt.inference.diagnostics reads
    assert stats["diverging"].dims == SAMPLE and stats["diverging"].shape == (2, 500)
    assert json.loads(tree.attrs["bayesirt_settings"])["sampler"] == sampler
    timings = json.loads(tree.attrs["bayesirt_timings"])
    assert set(timings) == set(json.loads(nutpie_fit.attrs["bayesirt_timings"]))
    assert timings["compile_s"] > 0 and timings["sample_s"] > 0


@pytest.mark.slow
def test_posterior_means_agree_with_nutpie(jax_fits, nutpie_fit):
    # Two independent estimates of one posterior mean differ by about N(0, se^2), with
    # se^2 = mcse_1^2 + mcse_2^2. Compared below: the 46 numbers of every posterior variable (theta,
    # discrimination, intercept). |z| < 4 for all of them fails by chance with probability at most
    # 46 x 6.3e-5 = 0.3% (Bonferroni), where |z| < 3 would fail a correct sampler about 1 time in 8.
    _, tree, _ = jax_fits
    post, ref = tree.posterior, nutpie_fit.posterior
    se = np.sqrt(az.mcse(tree).to_dataset() ** 2 + az.mcse(nutpie_fit).to_dataset() ** 2)
    for name in ref.data_vars:
        # The bound means something only if the Monte Carlo error is small against the posterior sd.
        assert (se[name] < 0.15 * ref[name].std(SAMPLE)).all(), name
        z = (post[name].mean(SAMPLE) - ref[name].mean(SAMPLE)) / se[name]
        assert float(abs(z).max()) < 4, (name, float(abs(z).max()))


@pytest.mark.slow
def test_same_seed_same_draws(jax_fits):
    _, first, again = jax_fits
    for group in ("posterior", "sample_stats"):
        for name, values in first[group].data_vars.items():
            np.testing.assert_array_equal(values.values, again[group][name].values, err_msg=f"{group}/{name}")


@pytest.fixture
def no_jax(monkeypatch):
    """JAX as if not installed: None in sys.modules makes `import jax` fail like a missing package,
    and pymc.sampling.jax (whose first import is jax) is imported afresh."""
    monkeypatch.delitem(sys.modules, "pymc.sampling.jax", raising=False)
    for name in ("jax", "numpyro", "blackjax"):
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.parametrize("sampler", ["numpyro", "blackjax"])
def test_without_jax_the_error_is_the_install_hint(no_jax, responses, sampler):
    with pytest.raises(BayesIRTError) as err:
        fit(responses, "2pl", sampler=sampler, **RUN)
    assert str(err.value) == _hint("fit", sampler, "jax")
    with pytest.raises(BayesIRTError) as err:
        sample_model(None, sampler=sampler)  # checked before the model is looked at
    assert str(err.value) == _hint("sample_model", sampler, "jax")


def test_without_the_sampler_package_the_error_names_it(monkeypatch, responses):
    pytest.importorskip("jax")
    monkeypatch.setitem(sys.modules, "blackjax", None)
    with pytest.raises(BayesIRTError) as err:
        fit(responses, "2pl", sampler="blackjax", **RUN)
    assert str(err.value) == _hint("fit", "blackjax", "blackjax")


@pytest.mark.slow
def test_without_jax_other_methods_ignore_the_sampler(no_jax, responses):
    tree = fit(responses, "2pl", method="advi", sampler="numpyro", draws=20, advi_iterations=500, progress=False)
    assert tree.posterior.sizes["draw"] == 20


def test_without_jax_map_is_refused_by_method_not_sampler(no_jax, responses):
    # fit offers no joint MAP: the method is refused (naming the MAP-EM), not the sampler
    with pytest.raises(BayesIRTError, match=r"^The 'method' parameter of fit must be one of .*got 'map'.*priors=True"):
        fit(responses, "2pl", method="map", sampler="numpyro", progress=False)


def test_cli_without_jax_prints_the_hint(no_jax, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["fit", "lsat7", "--sampler", "numpyro", "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"bayesirt: error: {_hint('fit', 'numpyro', 'jax')}\n" in err and "Traceback" not in err
    assert not out.exists()


@pytest.fixture(scope="module")
def nuts_gpu():
    """benchmarks/nuts_gpu.py as a module (the scripts of benchmarks/ are no package)."""
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "nuts_gpu.py"
    spec = importlib.util.spec_from_file_location("nuts_gpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_script_without_a_gpu_prints_one_line_and_exits_0(nuts_gpu, tmp_path, capsys):
    if nuts_gpu.accelerators():
        pytest.skip("a GPU is visible: the script would measure")
    out = tmp_path / "gpu.json"
    assert nuts_gpu.main(["--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("\n") == 1 and printed.startswith("nuts_gpu.py: ") and "Traceback" not in printed
    assert not out.exists()


@pytest.mark.slow
def test_gpu_script_cpu_small_run(nuts_gpu, tmp_path):
    """The GPU benchmark's own code on the CPU at 40 x 60: it runs, converges and recovers the simulated truth."""
    pytest.importorskip("jax")
    pytest.importorskip("numpyro")
    out = tmp_path / "gpu.json"
    assert nuts_gpu.main(["--cpu-small", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    run = result["run"]
    assert result["config"]["models"] == 40 and result["config"]["items"] == 60 and result["devices"] == ["cpu"]
    assert run["max_rhat"] < 1.05 and run["divergences"] == 0
    assert run["min_bulk_ess"] > 50  # of 400 draws
    assert run["ess_per_wall_s"] == pytest.approx(run["min_bulk_ess"] / run["wall_s"])
    truth = run["corr_truth"]  # correlations of posterior means with the simulated values (40 models: a is noisy)
    assert truth["theta"] > 0.9 and truth["difficulty"] > 0.75 and truth["discrimination"] > 0.5
    assert out.with_suffix(".md").read_text().startswith("# NUTS on the JAX path")
