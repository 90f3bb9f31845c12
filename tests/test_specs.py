"""Spec files: the built-ins declare every prior explicitly; malformed specs name key and fix."""

import pytest

from bayesirt.errors import SpecError
from bayesirt.models.specs import Prior, builtin_specs, load_spec


def test_builtin_specs_declare_safe_regularization():
    assert builtin_specs() == ["2pl", "2pl-hierarchical", "3pl", "4pl", "mirt", "mirt-confirmatory", "rasch"]
    kinds = {name: load_spec(name).kind for name in builtin_specs()}
    assert kinds == {"2pl": "2pl", "2pl-hierarchical": "2pl", "3pl": "3pl", "4pl": "4pl", "mirt": "mirt",
                     "mirt-confirmatory": "mirt", "rasch": "1pl"}
    assert [name for name in builtin_specs() if getattr(load_spec(name), "hierarchical", False)] == ["2pl-hierarchical"]
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
