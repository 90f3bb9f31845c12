"""1PL-4PL specs whose item priors learn hyperparameters, beyond the built-in ``2pl-hierarchical``, with numbers away
from 0 and 1 so that every constant counts (shared by the tests of the builder and of the direct posterior)."""

from bayesirt.models.specs import parse_spec

_MU = '{{ distribution = "normal", mu = {}, sigma = {} }}'
_SIGMA = '{{ distribution = "halfnormal", sigma = {} }}'


def _text(parameterization, theta, discrimination, location, extra=""):
    name = "difficulty" if parameterization == "difficulty" else "intercept"
    return (f'name = "test"\nparameterization = "{parameterization}"\n'
            f'[priors.theta]\ndistribution = "normal"\nmu = {theta[0]}\nsigma = {theta[1]}\n'
            f'[priors.discrimination]\n{discrimination}\n'
            f'[priors.{name}]\ndistribution = "normal"\nmu = {location[0]}\nsigma = {location[1]}\n{extra}')


#: name -> spec text: the slope-intercept form with a learned intercept mu; fixed difficulty priors; a half-normal
#: slope with a learned sigma (not eligible for the direct posterior); a 3PL.
HIERARCHICAL = {
    "intercept form": _text("slope-intercept", (0.3, 1.4),
                            f'distribution = "lognormal"\nmu = {_MU.format(0.2, 0.4)}\nsigma = {_SIGMA.format(0.7)}',
                            (_MU.format(-0.3, 1.5), 1.7)),
    "fixed difficulty prior": _text("difficulty", (-0.2, 0.8),
                                    f'distribution = "lognormal"\nmu = {_MU.format(0.1, 0.5)}\nsigma = 0.45', (0.4, 1.6)),
    "half-normal slope": _text("difficulty", (0.0, 1.0), f'distribution = "halfnormal"\nsigma = {_SIGMA.format(1.5)}',
                               (_MU.format(0.2, 1.1), _SIGMA.format(1.8))),
    "3pl": _text("slope-intercept", (0.0, 1.0),
                 f'distribution = "lognormal"\nmu = {_MU.format(0.0, 0.5)}\nsigma = {_SIGMA.format(0.5)}', (0.0, 2.0),
                 '[priors.guessing]\ndistribution = "beta"\nalpha = 5.0\nbeta = 17.0\n'),
}
#: Those the direct posterior expresses (a log-normal slope).
DIRECT = tuple(name for name in HIERARCHICAL if name != "half-normal slope")


def hierarchical_spec(name):
    return parse_spec(HIERARCHICAL[name])
