"""Spec files: the built-ins declare every prior explicitly; malformed specs name key and fix; every built-in
spec (whatever its name) fits, calibrates by MML, simulates and tabulates; a spec's kind is what it has."""

import numpy as np
import pytest

from bayesirt.data import simulate_pl
from bayesirt.errors import SpecError
from bayesirt.models.specs import LOGISTIC_KINDS, IRTSpec, Prior, builtin_specs, load_spec


def test_builtin_specs_declare_safe_regularization():
    assert {"2pl", "3pl", "4pl", "mirt", "rasch"} <= set(builtin_specs())  # the SAFE set; others may be added
    assert load_spec("rasch").kind == "1pl" and load_spec("2pl").kind == "2pl" and load_spec("mirt").kind == "mirt"
    assert load_spec("3pl").kind == "3pl" and load_spec("4pl").kind == "4pl"
    assert not load_spec("2pl").hierarchical and load_spec("2pl-hierarchical").hierarchical
    mirt = load_spec("mirt")
    assert mirt.priors["loading"] == Prior("normal", {"mu": 0.0, "sigma": 1.5})  # SAFE App. C
    assert (mirt.structure, mirt.dimensions) == ("exploratory", 2)
    assert load_spec("mirt-confirmatory").item_map == "item_group"
    two = load_spec("2pl")
    assert two.priors["discrimination"] == Prior("lognormal", {"mu": 0.0, "sigma": 0.5})
    assert two.priors["intercept"] == Prior("normal", {"mu": 0.0, "sigma": 2.0})
    assert two.priors["theta"] == Prior("normal", {"mu": 0.0, "sigma": 1.0})
    assert load_spec("3pl").priors["guessing"] == Prior("beta", {"alpha": 5.0, "beta": 17.0})
    assert load_spec("4pl").priors["slip"] == Prior("beta", {"alpha": 2.0, "beta": 18.0})
    assert load_spec("rasch").discrimination_structure == "common"
    assert "[priors.discrimination]" in two.text  # the full text travels with every fit


def test_alias_and_case():
    assert load_spec("1PL").name == "rasch"


def test_user_spec_with_difficulty_prior(tmp_path):
    path = tmp_path / "weak.toml"
    path.write_text(
        'name = "weak"\nparameterization = "difficulty"\n'
        '[priors.theta]\ndistribution = "normal"\nmu = 0\nsigma = 1\n'
        '[priors.discrimination]\ndistribution = "lognormal"\nmu = 0\nsigma = 1\n'
        '[priors.difficulty]\ndistribution = "normal"\nmu = 0\nsigma = 5\n'
    )
    spec = load_spec(path)
    assert spec.location == "difficulty" and spec.kind == "2pl"
    assert spec.priors["difficulty"].describe() == "Normal(mu=0, sigma=5)"


def test_hierarchical_spec_learns_item_locations_and_scales():
    spec = load_spec("2pl-hierarchical")
    assert spec.location == "difficulty" and spec.hierarchical and not load_spec("2pl").hierarchical
    b = spec.priors["difficulty"]
    assert b == Prior("normal", {"mu": Prior("normal", {"mu": 0.0, "sigma": 1.0}),
                                 "sigma": Prior("halfnormal", {"sigma": 2.0})})
    assert b.describe() == "Normal(mu=Normal(mu=0, sigma=1), sigma=HalfNormal(sigma=2))"
    assert spec.priors["discrimination"].describe() == "LogNormal(mu=Normal(mu=0, sigma=0.5), sigma=HalfNormal(sigma=0.5))"
    assert not spec.priors["theta"].hierarchical


def _write(tmp_path, body):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    return path


GOOD = (
    '[priors.theta]\ndistribution = "normal"\nmu = 0\nsigma = 1\n'
    '[priors.discrimination]\ndistribution = "lognormal"\nmu = 0\nsigma = 0.5\n'
    '[priors.intercept]\ndistribution = "normal"\nmu = 0\nsigma = 2\n'
)


@pytest.mark.parametrize(
    "body, message",
    [
        (GOOD.replace('"lognormal"', '"gamma"'), r"\[priors.discrimination\]: 'distribution' must be one of \['lognormal', 'halfnormal'\]; got 'gamma'"),
        (GOOD.replace("sigma = 2\n", ""), r"\[priors.intercept\]: missing 'sigma'"),
        (GOOD.replace("sigma = 2", "sigma = -2"), r"'sigma' must be > 0; got -2.0"),
        (GOOD.replace("sigma = 2", 'sigma = "two"'), r"'sigma' must be a number; got 'two'"),
        (GOOD.replace("mu = 0\nsigma = 2", "mu = 0\nsigma = 2\nscale = 3"), r"unknown key\(s\) \['scale'\]"),
        ('parameterization = "centered"\n' + GOOD, r"'parameterization' must be one of \['slope-intercept', 'difficulty'\]"),
        ('link = "probit"\n' + GOOD, r"'link' must be one of \['logit'\]; got 'probit'"),
        ('priorz = 1\n' + GOOD, r"unknown top-level key\(s\) \['priorz'\]"),
        (GOOD + '[priors.ability]\ndistribution = "normal"\nmu = 0\nsigma = 1\n', r"unknown prior \[priors.ability\]"),
        (GOOD.replace("[priors.intercept]", "[priors.difficulty]"), r"unknown prior \[priors.difficulty\]; with parameterization 'slope-intercept'"),
        (GOOD.split("[priors.intercept]")[0], r"missing \[priors.intercept\]"),
        (GOOD.replace('distribution = "lognormal"', 'structure = "fixed"'), r"structure 'fixed' needs 'value'"),
        (GOOD.replace('distribution = "lognormal"', 'structure = "shared"\ndistribution = "lognormal"'), r"'structure' must be one of \['item', 'common', 'fixed'\]"),
        (GOOD + '[priors.guessing]\ndistribution = "beta"\nalpha = 5\n', r"\[priors.guessing\]: missing 'beta'"),
        ("[priors\n", r"not valid TOML"),
    ],
)
def test_malformed_spec_names_key_and_allowed_values(tmp_path, body, message):
    with pytest.raises(SpecError, match=message):
        load_spec(_write(tmp_path, body))


def test_unknown_spec_name_lists_builtins():
    with pytest.raises(SpecError, match=r"unknown model spec '5pl': give one of \['2pl', '2pl-hierarchical', '3pl', '4pl', 'mirt', 'mirt-confirmatory', 'rasch', '1pl'\]"):
        load_spec("5pl")


def test_fixed_slope(tmp_path):
    spec = load_spec(_write(tmp_path, GOOD.replace('distribution = "lognormal"\nmu = 0\nsigma = 0.5', 'structure = "fixed"\nvalue = 1.7')))
    assert spec.discrimination_structure == "fixed" and spec.discrimination_value == 1.7
    assert "discrimination" not in spec.priors and spec.kind == "1pl"


HIERARCHICAL = GOOD.replace("mu = 0\nsigma = 2", 'mu = { distribution = "normal", mu = 0, sigma = 1 }\n'
                            'sigma = { distribution = "halfnormal", sigma = 1 }')


@pytest.mark.parametrize(
    "body, message",
    [
        (GOOD.replace("mu = 0\nsigma = 1", 'mu = 0\nsigma = { distribution = "halfnormal", sigma = 1 }'),
         r"\[priors.theta\]: 'sigma' must be a number; got a table \(a hyperprior, i.e. a learned mu or sigma, is "
         r"allowed only for 'mu' and 'sigma' of \[priors.discrimination\], \[priors.intercept\], \[priors.difficulty\]"),
        (HIERARCHICAL.replace('"halfnormal", sigma = 1', '"lognormal", mu = 0, sigma = 1'),
         r"\[priors.intercept\] sigma: 'distribution' must be one of \['halfnormal'\]; got 'lognormal'"),
        (HIERARCHICAL.replace('"halfnormal", sigma = 1', '"halfnormal", sigma = -1'),
         r"\[priors.intercept\] sigma: 'sigma' must be > 0; got -1.0"),
        (HIERARCHICAL.replace('"normal", mu = 0, sigma = 1 }', '"normal", mu = 0 }'),
         r"\[priors.intercept\] mu: missing 'sigma'; a normal hyperprior takes \['mu', 'sigma'\]"),
        (HIERARCHICAL.replace('"normal", mu = 0, sigma = 1 }', '"normal", mu = 0, sigma = { distribution = "halfnormal", sigma = 1 } }'),
         r"\[priors.intercept\] mu: 'sigma' must be a number; got a table \(hyperpriors do not nest\)"),
        (HIERARCHICAL.replace('"normal", mu = 0, sigma = 1 }', '"normal", mu = 0, sigma = 1, scale = 2 }'),
         r"\[priors.intercept\] mu: unknown key\(s\) \['scale'\]"),
        (GOOD.replace('distribution = "lognormal"\nmu = 0', 'structure = "common"\ndistribution = "lognormal"\n'
                      'mu = { distribution = "normal", mu = 0, sigma = 1 }'),
         r"a hyperprior \(a learned mu or sigma\) needs structure 'item'"),
    ],
)
def test_malformed_hyperprior_names_key_and_allowed_values(tmp_path, body, message):
    with pytest.raises(SpecError, match=message):
        load_spec(_write(tmp_path, body))
    assert load_spec(_write(tmp_path, HIERARCHICAL)).priors["intercept"].hierarchical


def test_mirt_spec_refuses_a_hyperprior(tmp_path):
    text = load_spec("mirt").text.replace("sigma = 1.5", 'sigma = { distribution = "halfnormal", sigma = 1 }', 1)
    assert text != load_spec("mirt").text
    with pytest.raises(SpecError, match=r"\[priors.loading\]: 'sigma' must be a number; got a table"):
        load_spec(_write(tmp_path, text))


_THETA = '[priors.theta]\ndistribution = "normal"\nmu = 0\nsigma = 1\n'
_SLOPE = '[priors.discrimination]\ndistribution = "lognormal"\nmu = 0\nsigma = 0.5\n'
_LOCATION = '[priors.intercept]\ndistribution = "normal"\nmu = 0\nsigma = 2\n'
_GUESS = '[priors.guessing]\ndistribution = "beta"\nalpha = 5\nbeta = 17\n'
_SLIP = '[priors.slip]\ndistribution = "beta"\nalpha = 2\nbeta = 18\n'


@pytest.mark.parametrize("parts, kind", [
    ((_SLOPE,), "2pl"), ((_SLOPE, _GUESS), "3pl"), ((_SLOPE, _SLIP), "3plu"), ((_SLOPE, _GUESS, _SLIP), "4pl")])
def test_kind_is_what_the_spec_has(tmp_path, parts, kind):
    """A 2PL with slip only is a 3PLu, not a 4PL: the kind names the asymptotes the spec has."""
    path = tmp_path / "user.toml"
    path.write_text('name = "user"\n' + _THETA + _LOCATION + "".join(parts))
    assert load_spec(path).kind == kind and kind in LOGISTIC_KINDS


def _small(spec, seed=3):
    """Tiny data from the spec's own kind (MIRT: a 2PL), 14 items x 40 models, and the true parameters."""
    if isinstance(spec, IRTSpec):
        return simulate_pl(spec.kind, n_items=14, n_models=40, seed=seed)
    data, truth = simulate_pl("2pl", n_items=14, n_models=40, seed=seed)
    groups = [f"g{i % 2}" for i in range(14)]  # a confirmatory map: two groups, two dimensions
    return data.assign_coords(item_group=("item", groups)), truth


@pytest.mark.parametrize("name", builtin_specs())
@pytest.mark.slow
def test_every_builtin_spec_fits_calibrates_simulates_and_tabulates(name):
    """Conformance of each spec file in models/ (a new file is tested without code): ADVI fit (briefly), the
    posterior tables with one row per item and model and a column per parameter it has, MML calibration."""
    _conforms(load_spec(name), name)


@pytest.mark.slow
def test_a_user_spec_with_slip_only_conforms_as_3plu(tmp_path):
    """The spec that reported itself as "4pl": a 2PL with slip only fits, calibrates and says it is a 3PLu."""
    path = tmp_path / "slip.toml"
    path.write_text('name = "2pl-slip"\n' + _THETA + _SLOPE + _LOCATION + _SLIP)
    _conforms(load_spec(path), "2pl-slip")


def _conforms(spec, name):
    from bayesirt.frequentist.mml import fit_mml  # import time: PyMC and the fitters only for this test
    from bayesirt.frequentist.mml_mirt import fit_mml_mirt
    from bayesirt.inference import fit
    from bayesirt.inference.summaries import item_table, model_table
    from bayesirt.report.mirt import mirt_tables

    data, truth = _small(spec)
    assert data.sizes == {"item": 14, "model": 40}
    tree = fit(data, spec, method="advi", draws=40, advi_iterations=400, seed=0, progress=False)
    if not isinstance(spec, IRTSpec):  # MIRT: its own tables (loadings, abilities per dimension), then MML
        tables = mirt_tables(tree, ci=0.9)
        assert tables and all(len(t) for t in tables.values())
        dims = spec.dimensions or 2  # a confirmatory spec has one dimension per item group
        mirt = fit_mml_mirt(data, dims, max_iter=20)
        assert mirt.loadings.shape == (14, dims) and np.isfinite(mirt.loglik)
        return
    items, models = item_table(tree), model_table(tree).set_index("model_id").loc[data["model"].values]
    theta = models["theta_mean"] if "theta_mean" in models else models.filter(like="theta").iloc[:, 0]
    assert len(models) == 40 and np.isfinite(theta.to_numpy(dtype=float)).all()
    # known truth: 14 items rank 40 models roughly right, even after a short ADVI run
    assert np.corrcoef(theta.to_numpy(dtype=float), truth["theta"].values)[0, 1] > 0.6, name
    assert len(items) == 14 and tree.attrs["bayesirt_spec_kind"] == spec.kind
    for parameter, has in (("guessing", spec.has_guessing), ("slip", spec.has_slip)):
        assert any(c.startswith(parameter) for c in items.columns) == has, (name, parameter)
    mml = fit_mml(data, spec, max_iter=60, se=False, priors=not spec.hierarchical)  # MAP-EM needs fixed priors
    assert np.isfinite(mml.items["discrimination"].values).all() and np.isfinite(mml.loglik)
    assert np.corrcoef(mml.abilities["theta"].values, truth["theta"].values)[0, 1] > 0.6, name
    for parameter, has in (("guessing", spec.has_guessing), ("slip", spec.has_slip)):
        assert bool((mml.items[parameter].values > 0).all()) == has, (name, parameter)  # else fixed at 0


@pytest.mark.slow
@pytest.mark.parametrize("name", builtin_specs())
def test_every_builtin_spec_samples(name):
    """NUTS on each spec file (briefly): draws come out finite."""
    from bayesirt.inference import fit  # import time, as above

    spec = load_spec(name)
    tree = fit(_small(spec)[0], spec, draws=30, tune=30, chains=1, seed=0, progress=False)
    assert np.isfinite(tree["posterior"]["theta"].values).all()
