"""Model specs: the declarative TOML files in ``models/`` read into typed, validated objects.

A spec knows nothing of PyMC: it declares the link, the parameterization and every prior.
``bayesirt.models.logistic`` builds the ``pm.Model`` from it. Users change a prior by editing
or copying a spec file, never by editing code.
"""

from __future__ import annotations

import math
import sys
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from bayesirt.data.kinds import KINDS as LOGISTIC_KINDS
from bayesirt.errors import SpecError

__all__ = ["SPEC_HELP", "LOGISTIC_KINDS", "Prior", "IRTSpec", "MIRTSpec", "load_spec", "parse_spec", "parse_toml", "toml_text", "builtin_specs",
           "BUILTIN_DIR"]

SPEC_HELP = "built-in spec (rasch/1pl, 2pl, 3pl, 4pl, mirt, ...) or the path of a spec file"
"""What a spec argument may be (command-line help)."""


def _builtin_dir() -> Path:
    """Top-level ``models/`` of a source checkout, else the copy packaged inside the wheel."""
    here = Path(__file__).resolve().parent
    checkout = here.parent.parent / "models"
    for candidate in (checkout, here / "builtin_specs"):
        if candidate.is_dir():
            return candidate
    return checkout


BUILTIN_DIR = _builtin_dir()
_ALIASES = {"1pl": "rasch"}

# Allowed distributions and their required hyperparameters, per parameter.
_DISTRIBUTIONS = {
    "normal": {"mu": float, "sigma": float},
    "lognormal": {"mu": float, "sigma": float},
    "halfnormal": {"sigma": float},
    "beta": {"alpha": float, "beta": float},
    "lkj": {"eta": float},
}
_ALLOWED = {
    "theta": ("normal",),
    "discrimination": ("lognormal", "halfnormal"),
    "intercept": ("normal",),
    "difficulty": ("normal",),
    "guessing": ("beta",),
    "slip": ("beta",),
}
# Hierarchical priors: the item priors' location ``mu`` and scale ``sigma`` may each be a table, a
# hyperprior learned from all items (``mu = { distribution = "normal", mu = 0.0, sigma = 1.0 }``,
# ``sigma = { distribution = "halfnormal", sigma = 1.0 }``). Not for theta (its prior fixes the latent
# scale) nor a common or fixed slope (one value has no spread to learn).
_HYPERPRIORS = {"mu": ("normal",), "sigma": ("halfnormal",)}
_HIERARCHICAL = ("discrimination", "intercept", "difficulty")
_PARAMETERIZATIONS = {"slope-intercept": "intercept", "difficulty": "difficulty"}
_STRUCTURES = ("item", "common", "fixed")
_TOP_KEYS = {"name", "title", "link", "parameterization", "priors", "description", "kind"}
_MIRT_KEYS = {"name", "title", "link", "kind", "structure", "dimensions", "item_map", "priors", "description"}
_MIRT_STRUCTURES = ("exploratory", "confirmatory")
# Exploratory loadings are Normal(0, sigma) (half-normal on the positive echelon diagonal);
# confirmatory loadings are one positive slope per item on its own dimension.
_MIRT_ALLOWED = {
    "exploratory": {"loading": ("normal",), "intercept": ("normal",)},
    "confirmatory": {"loading": ("lognormal", "halfnormal"), "intercept": ("normal",),
                     "factor_correlation": ("lkj",)},
}


@dataclass(frozen=True)
class Prior:
    """One prior: a distribution name and its hyperparameters (``{"mu": 0.0, "sigma": 1.0}``)."""

    distribution: str
    params: dict[str, float | Prior]

    @property
    def hierarchical(self) -> bool:
        """Whether a hyperparameter is itself a prior (learned from all items), not a number."""
        return any(isinstance(v, Prior) for v in self.params.values())

    def describe(self) -> str:
        """Readable form, e.g. ``LogNormal(mu=0, sigma=0.5)`` or, hierarchical,
        ``Normal(mu=Normal(mu=0, sigma=1), sigma=HalfNormal(sigma=1))``."""
        names = {"normal": "Normal", "lognormal": "LogNormal", "halfnormal": "HalfNormal", "beta": "Beta",
                 "lkj": "LKJCorr"}
        args = ", ".join(f"{k}={v.describe() if isinstance(v, Prior) else format(v, 'g')}" for k, v in self.params.items())
        return f"{names[self.distribution]}({args})"


@dataclass(frozen=True)
class IRTSpec:
    """A validated unidimensional logistic IRT spec (1PL-4PL).

    Attributes
    ----------
    name, title : str
    parameterization : {"slope-intercept", "difficulty"}
        Which location parameter carries the prior (``intercept`` d or ``difficulty`` b).
    discrimination_structure : {"item", "common", "fixed"}
    discrimination_value : float or None
        The constant slope when the structure is ``"fixed"``.
    priors : dict of str to Prior
        Keys among theta, discrimination, intercept/difficulty, guessing, slip.
    text : str
        The spec file's full text, stored in every output's attributes.
    source : str
        Where the spec was read from.
    """

    name: str
    title: str
    parameterization: str
    discrimination_structure: str
    discrimination_value: float | None
    priors: dict[str, Prior] = field(repr=False)
    text: str = field(repr=False)
    source: str = ""

    @property
    def location(self) -> str:
        """The location parameter that carries the prior: ``"intercept"`` or ``"difficulty"``."""
        return _PARAMETERIZATIONS[self.parameterization]

    @property
    def has_guessing(self) -> bool:
        return "guessing" in self.priors

    @property
    def has_slip(self) -> bool:
        return "slip" in self.priors

    @property
    def hierarchical(self) -> bool:
        """Whether an item prior learns its location or scale from the items (see :class:`Prior`)."""
        return any(p.hierarchical for p in self.priors.values())

    @property
    def learned_slope_scale(self) -> bool:
        """Whether the item slopes' scale is learned: a log-normal slope prior's ``mu`` or a half-normal one's
        ``sigma`` is a hyperprior (the posterior is then sampled in units of it: ``build_logistic``)."""
        if self.discrimination_structure != "item":
            return False
        prior = self.priors["discrimination"]
        return isinstance(prior.params.get("mu" if prior.distribution == "lognormal" else "sigma"), Prior)

    @property
    def kind(self) -> str:
        """What the spec has, named as in the IRT literature (one of :data:`LOGISTIC_KINDS`): ``"1pl"`` (a
        common or fixed slope) or ``"2pl"`` (a slope per item) without asymptotes; ``"3pl"`` with a lower
        asymptote (guessing); ``"3plu"`` with an upper asymptote only (slip: the "3PLu" of the 4PL literature);
        ``"4pl"`` with both."""
        if self.has_guessing and self.has_slip:
            return "4pl"
        if self.has_guessing:
            return "3pl"
        if self.has_slip:
            return "3plu"
        return "2pl" if self.discrimination_structure == "item" else "1pl"


@dataclass(frozen=True)
class MIRTSpec:
    """A validated compensatory logistic MIRT spec: ``P(y_im = 1) = sigmoid(loading_i . theta_m + d_i)``.

    Attributes
    ----------
    name, title : str
    structure : {"exploratory", "confirmatory"}
        Exploratory: every item loads on every dimension; rotation and sign are identified by an
        echelon (lower-triangular) pattern on ``dimensions`` anchor items with a positive
        diagonal, and ``theta ~ N(0, I)``. Confirmatory: each item loads on the one dimension that
        ``item_map`` names, with a positive loading; ``theta ~ N(0, R)`` with unit variances and
        an LKJ prior on the factor correlation matrix R.
    dimensions : int
        Number of latent dimensions (exploratory; a confirmatory spec takes it from the map).
    item_map : str or None
        Confirmatory only: the item coordinate of the data (e.g. ``"item_group"``) whose values
        name each item's dimension.
    priors : dict of str to Prior
        ``loading``, ``intercept`` and (confirmatory) ``factor_correlation``.
    text, source : str
    """

    name: str
    title: str
    structure: str
    dimensions: int
    item_map: str | None
    priors: dict[str, Prior] = field(repr=False)
    text: str = field(repr=False)
    source: str = ""

    kind = "mirt"

    def with_dimensions(self, dimensions: int) -> MIRTSpec:
        """The same exploratory spec with another number of dimensions (``compare --dims``)."""
        if self.structure != "exploratory":
            raise SpecError(f"{self.source}: a confirmatory spec takes its dimensions from item_map "
                            f"{self.item_map!r}; use an exploratory spec to vary the dimensions")
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
            raise SpecError(f"MIRT dimensions must be a positive integer; got {dimensions!r}")
        return replace(self, name=f"{self.name.split('-')[0]}-{dimensions}d", dimensions=dimensions)


def builtin_specs() -> list[str]:
    """Names of the built-in spec files in ``models/`` (aliases such as ``1pl`` not listed)."""
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.toml"))


def load_spec(name_or_path: str | Path) -> IRTSpec | MIRTSpec:
    """Read and validate a spec: a built-in name (``"2pl"``, ``"rasch"``/``"1pl"``, ``"3pl"``,
    ``"4pl"``) or the path of a TOML file.

    Raises
    ------
    SpecError
        When the file is missing or malformed; the message names the key and the allowed values.
    """
    text_name = str(name_or_path)
    key = _ALIASES.get(text_name.lower(), text_name.lower())
    builtin = BUILTIN_DIR / f"{key}.toml"
    path = builtin if (not text_name.endswith(".toml") and builtin.is_file()) else Path(name_or_path)
    if not path.is_file():
        raise SpecError(
            f"unknown model spec {text_name!r}: give one of {builtin_specs() + sorted(_ALIASES)} "
            "or the path of a .toml spec file"
        )
    return parse_spec(toml_text(path), where=str(path))


def toml_text(path: str | Path) -> str:
    """The text of a TOML file (a spec or an analysis file), or one :class:`SpecError` line for a file
    that cannot be read or is not UTF-8."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise SpecError(f"cannot read {path} ({type(err).__name__}: {err.strerror}); check the file") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise SpecError(
            f"{path}: not UTF-8 text (byte 0x{raw[err.start]:02x} on line {line}); save the file as UTF-8"
        ) from None


def parse_toml(text: str, *, where: str) -> dict:
    """``tomllib.loads`` with every way it fails (syntax, nesting too deep, a number with too many
    digits) as one :class:`SpecError` line naming ``where``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{where}: not valid TOML ({err}); fix the syntax") from None
    except RecursionError:
        raise SpecError(
            f"{where}: not valid TOML (arrays or inline tables nested too deeply); fix the syntax"
        ) from None
    except ValueError:  # tomllib's int("...") beyond Python's digit limit
        raise SpecError(f"{where}: not valid TOML (a number with more than {sys.get_int_max_str_digits()} digits); "
                        "fix the number") from None


def parse_spec(text: str, *, where: str = "<spec text>") -> IRTSpec | MIRTSpec:
    """Validate a spec from its TOML text (as stored in every fit's ``bayesirt_spec_text``)."""
    raw = parse_toml(text, where=where)
    if raw.get("kind", "logistic") == "mirt":
        return _parse_mirt(raw, text=text, where=where)
    _choice(where, "kind", raw.get("kind", "logistic"), ("logistic", "mirt"))
    return _parse(raw, text=text, where=where)


def _choice(where: str, key: str, value, allowed) -> str:
    if value not in allowed:
        raise SpecError(f"{where}: {key!r} must be one of {list(allowed)}; got {value!r}")
    return value


def _number(where: str, key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"{where}: {key!r} must be a number; got {value!r}")
    try:
        number = float(value)
    except OverflowError:  # a TOML integer beyond float range
        number = math.inf
    if not math.isfinite(number):
        shown = value if isinstance(value, float) else f"an integer of {len(str(abs(value)))} digits"
        raise SpecError(f"{where}: {key!r} must be a finite number; got {shown}")
    return number


def _prior(where: str, name: str, table, allowed=None) -> Prior:
    ctx = f"{where} [priors.{name}]"
    if not isinstance(table, dict):
        raise SpecError(f"{ctx}: must be a table with 'distribution' and its parameters")
    dist = _choice(ctx, "distribution", table.get("distribution"), (allowed or _ALLOWED)[name])
    needed = _DISTRIBUTIONS[dist]
    extra = set(table) - set(needed) - {"distribution"} - ({"structure"} if name == "discrimination" else set())
    if extra:
        raise SpecError(f"{ctx}: unknown key(s) {sorted(extra)}; a {dist} prior takes {sorted(needed)}")
    params: dict[str, float | Prior] = {}
    for key in needed:
        if key not in table:
            raise SpecError(f"{ctx}: missing {key!r}; a {dist} prior takes {sorted(needed)}")
        if isinstance(table[key], dict):
            params[key] = _hyperprior(ctx, name, key, table[key], allowed is None)
        else:
            params[key] = _number(ctx, key, table[key])
    positive = [k for k in ("sigma", "alpha", "beta", "eta")
                if k in params and not isinstance(params[k], Prior) and params[k] <= 0]
    if positive:
        raise SpecError(f"{ctx}: {positive[0]!r} must be > 0; got {params[positive[0]]}")
    return Prior(dist, params)


def _hyperprior(ctx: str, name: str, key: str, table: dict, logistic: bool) -> Prior:
    """A hyperparameter given as a table: the prior of an item prior's ``mu`` or ``sigma``, learned
    from all items (1PL-4PL item priors only; its own parameters are numbers)."""
    if not (logistic and name in _HIERARCHICAL and key in _HYPERPRIORS):
        raise SpecError(f"{ctx}: {key!r} must be a number; got a table (a hyperprior, i.e. a learned mu or sigma, "
                        f"is allowed only for {' and '.join(repr(k) for k in _HYPERPRIORS)} of "
                        f"{', '.join(f'[priors.{n}]' for n in _HIERARCHICAL)} in a 1PL-4PL spec)")
    hctx = f"{ctx} {key}"
    dist = _choice(hctx, "distribution", table.get("distribution"), _HYPERPRIORS[key])
    needed = _DISTRIBUTIONS[dist]
    extra = set(table) - set(needed) - {"distribution"}
    if extra:
        raise SpecError(f"{hctx}: unknown key(s) {sorted(extra)}; a {dist} hyperprior takes {sorted(needed)}")
    params = {}
    for k in needed:
        if k not in table:
            raise SpecError(f"{hctx}: missing {k!r}; a {dist} hyperprior takes {sorted(needed)}")
        if isinstance(table[k], dict):
            raise SpecError(f"{hctx}: {k!r} must be a number; got a table (hyperpriors do not nest)")
        params[k] = _number(hctx, k, table[k])
    if params.get("sigma", 1.0) <= 0:
        raise SpecError(f"{hctx}: 'sigma' must be > 0; got {params['sigma']}")
    return Prior(dist, params)


def _parse(raw: dict, *, text: str, where: str) -> IRTSpec:
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise SpecError(f"{where}: unknown top-level key(s) {sorted(unknown)}; allowed: {sorted(_TOP_KEYS)}")
    _choice(where, "link", raw.get("link", "logit"), ("logit",))
    parameterization = _choice(
        where, "parameterization", raw.get("parameterization", "slope-intercept"), tuple(_PARAMETERIZATIONS)
    )
    location = _PARAMETERIZATIONS[parameterization]
    priors_raw = raw.get("priors")
    if not isinstance(priors_raw, dict):
        raise SpecError(f"{where}: missing the [priors] tables (theta, discrimination, {location})")
    allowed_names = ("theta", "discrimination", location, "guessing", "slip")
    for name in priors_raw:
        if name not in allowed_names:
            raise SpecError(
                f"{where}: unknown prior [priors.{name}]; with parameterization {parameterization!r} "
                f"the allowed priors are {list(allowed_names)}"
            )
    for name in ("theta", "discrimination", location):
        if name not in priors_raw:
            raise SpecError(f"{where}: missing [priors.{name}]; every spec declares theta, discrimination and {location}")

    disc = priors_raw["discrimination"]
    if not isinstance(disc, dict):
        raise SpecError(f"{where} [priors.discrimination]: must be a table")
    structure = _choice(f"{where} [priors.discrimination]", "structure", disc.get("structure", "item"), _STRUCTURES)
    value = None
    priors: dict[str, Prior] = {}
    if structure == "fixed":
        if "value" not in disc:
            raise SpecError(f"{where} [priors.discrimination]: structure 'fixed' needs 'value' (e.g. value = 1.0)")
        value = _number(f"{where} [priors.discrimination]", "value", disc["value"])
        if value <= 0:
            raise SpecError(f"{where} [priors.discrimination]: 'value' must be > 0; got {value}")
    else:
        priors["discrimination"] = _prior(where, "discrimination", disc)
        if structure == "common" and priors["discrimination"].hierarchical:
            raise SpecError(f"{where} [priors.discrimination]: a hyperprior (a learned mu or sigma) needs structure "
                            "'item'; a common slope is one value with no spread to learn")
    for name in ("theta", location, "guessing", "slip"):
        if name in priors_raw:
            priors[name] = _prior(where, name, priors_raw[name])

    name = raw.get("name", Path(where).stem)
    return IRTSpec(
        name=str(name),
        title=str(raw.get("title", name)),
        parameterization=parameterization,
        discrimination_structure=structure,
        discrimination_value=value,
        priors=priors,
        text=text,
        source=where,
    )


def _parse_mirt(raw: dict, *, text: str, where: str) -> MIRTSpec:
    unknown = set(raw) - _MIRT_KEYS
    if unknown:
        raise SpecError(f"{where}: unknown top-level key(s) {sorted(unknown)}; a MIRT spec allows {sorted(_MIRT_KEYS)}")
    _choice(where, "link", raw.get("link", "logit"), ("logit",))
    structure = _choice(where, "structure", raw.get("structure", "exploratory"), _MIRT_STRUCTURES)
    allowed = _MIRT_ALLOWED[structure]
    priors_raw = raw.get("priors")
    if not isinstance(priors_raw, dict) or set(priors_raw) != set(allowed):
        got = sorted(priors_raw) if isinstance(priors_raw, dict) else "none"
        article = "an" if structure == "exploratory" else "a"
        raise SpecError(f"{where}: {article} {structure} MIRT spec declares exactly the priors {sorted(allowed)}; "
                        f"got {got}")
    priors = {name: _prior(where, name, priors_raw[name], allowed) for name in allowed}
    if structure == "exploratory" and priors["loading"].params["mu"] != 0:
        raise SpecError(f"{where} [priors.loading]: an exploratory loading prior must have mu = 0 (its half on the "
                        f"echelon diagonal is the positive part of the same prior); got mu = {priors['loading'].params['mu']}")
    item_map = raw.get("item_map")
    if structure == "confirmatory" and not isinstance(item_map, str):
        raise SpecError(f"{where}: a confirmatory MIRT spec needs item_map, the item coordinate naming each item's "
                        "dimension (e.g. item_map = \"item_group\")")
    if structure == "exploratory" and item_map is not None:
        raise SpecError(f"{where}: item_map applies to structure = \"confirmatory\" only; remove it or change structure")
    dimensions = raw.get("dimensions", 1 if structure == "exploratory" else 0)
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or (structure == "exploratory" and dimensions < 1):
        raise SpecError(f"{where}: 'dimensions' must be a positive integer; got {dimensions!r}")
    name = raw.get("name", Path(where).stem)
    return MIRTSpec(name=str(name), title=str(raw.get("title", name)), structure=structure, dimensions=dimensions,
                    item_map=item_map, priors=priors, text=text, source=where)
