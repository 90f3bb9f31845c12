"""The audit's settings and results: :class:`AuditConfig` (NT's frozen specification, Table 12),
:class:`FoldResult`, :class:`AuditResult`, and the check every diagnostic makes of a finished audit."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.audit.anchors import ADJUSTMENTS, ANCHOR_FRACTION, Purification
from bayesirt.audit.spectral import DimensionSelection
from bayesirt.data.populations import POPULATION_SEED
from bayesirt.errors import DataError

__all__ = ["AuditConfig", "AuditResult", "FoldResult", "check_audit", "input_sha256", "QUICK_MAX_K", "QUICK_CONTROLS",
           "BAYES_CONTROLS", "BAYES_METHODS", "BAYES_PRIORS"]


BAYES_METHODS = ("laplace", "advi", "fullrank_advi", "nuts", "bootstrap")


BAYES_PRIORS = ("ridge", "hierarchical")


QUICK_MAX_K = 32


QUICK_CONTROLS = 199


#: Random controls per posterior draw and fold: the per-draw null of :func:`bayesirt.audit.bayes.propagate_posterior`
#: and the discrimination-matched controls of :mod:`bayesirt.audit.bayes_diagnostics`. 100: scoring them was
#: 61% of a --bayes audit's time at 200 (py-spy, 2,400 models x 1,267 items); against 1,000 per draw, 200 moved
#: each draw's excess by about 0.1 pp and 50 by about 0.2 pp, with a posterior SD of the excess of 1.2-1.4 pp.
BAYES_CONTROLS = 100


@dataclass(frozen=True)
class AuditConfig:
    """Settings of the primary audit; defaults are NT's frozen specification (Table 12).

    ``quick`` limits K to 32 and the controls to 199 (and the bootstrap to 199) for a fast look.
    ``families``, ``representative`` and ``lineage_filter`` select the population
    (:func:`bayesirt.data.populations.audit_population`): ``families=None`` (the default) audits
    every family label of the data except ``"other"`` and ``"ambiguous"``, labels used as given; a
    tuple of labels restricts the audit to them (``summary["families"]`` records the families
    actually audited). ``fixed_k`` freezes K per audit fold
    instead of selecting it (the population perturbations of NT D.2). ``bootstrap = 0`` or
    ``owner_bootstrap = 0`` skips that bootstrap. ``adjustment`` is the ability adjustment:
    NT's spectral working model, "direct-mirt", the direct penalized joint MIRT of NT B.1
    (K selected by the same nested one-SE rule on its own held-out loss), or "bayes-mirt", the
    PyMC MIRT posterior means fitted by ADVI (:mod:`bayesirt.audit.bayes_mirt`; K by the spectral
    rule).
    ``bayes`` adds the Bayesian layer (:mod:`bayesirt.audit.bayes`): the residual-DIF posterior of
    each audit half given its offsets (``bayes_method``: "laplace", per item, the default;
    "advi", "fullrank_advi" or "nuts"), or the
    owner-clustered Bayesian bootstrap that refits offsets, DIF and purification per draw with K
    fixed ("bootstrap", :mod:`bayesirt.audit.bayes_bootstrap`; ``bayes_prior`` unused); ``bayes_draws`` draws;
    ``bayes_prior``: "ridge", NT's lambda = 1 as an N(0, 1) prior, or "hierarchical", a learned
    scale) carried through anchors and reversals, and through the diagnostics
    (:mod:`bayesirt.audit.bayes_diagnostics`: within-family specificity always, the curves with
    ``sensitivity``, and, in :func:`bayesirt.audit.run_audit_job`, the signatures and the
    discrimination-matched controls, ``bayes_controls`` per draw, at most ``controls``), and the
    near-tie leaderboard (:mod:`bayesirt.audit.near_ties`): each eligible pair's posterior
    probability that the higher-scoring model has the higher expected accuracy (the paired model of
    :mod:`bayesirt.audit.paired`, which decides the categories), and, for reference,
    ``prob_theta_a_ahead`` from ``bayes_ability_spec`` (a built-in spec name or a 1PL-4PL spec file;
    default 2PL) fitted to the full benchmark on every retained model by ``bayes_method`` (full-rank
    ADVI there becomes mean-field ADVI) (``bayes_ability_spec=None`` skips the leaderboard).
    ``sensitivity`` adds the score-gap threshold and anchor-fraction curves
    (:mod:`bayesirt.audit.sensitivity`, NT B.4-B.5).
    """

    owner_cap: int = 5
    min_family_size: int = 20
    families: tuple[str, ...] | None = None
    representative: str = "median"
    lineage_filter: bool = False
    fixed_k: tuple[int, int] | None = None
    alpha: float = ANCHOR_FRACTION
    epsilon: float = 0.01
    controls: int = 1000
    bootstrap: int = 2000
    owner_bootstrap: int = 2000
    max_k: int | None = None
    population_seed: int = POPULATION_SEED
    seed: int = 0
    quick: bool = False
    bayes: bool = False
    bayes_method: str = "laplace"
    bayes_draws: int = 400
    bayes_prior: str = "ridge"
    bayes_controls: int = BAYES_CONTROLS
    bayes_ability_spec: str | None = "2pl"
    adjustment: str = "spectral"
    sensitivity: bool = False

    def __post_init__(self):
        if self.families is not None:
            if isinstance(self.families, str) or not isinstance(self.families, (tuple, list)):
                raise DataError("The 'families' parameter of AuditConfig must be None or a sequence of family labels "
                                f"such as ('Qwen', 'Llama'). Got {self.families!r} instead.")
            labels = tuple(self.families)
            if not labels or len(set(labels)) != len(labels) or not all(isinstance(f, str) and f for f in labels):
                raise DataError("The 'families' parameter of AuditConfig must be None or a non-empty sequence of "
                                f"distinct, non-empty family labels. Got {self.families!r} instead.")
            object.__setattr__(self, "families", labels)  # a tuple, so the config stays hashable
        for name, low in (("owner_cap", 1), ("min_family_size", 1), ("controls", 1), ("bootstrap", 0),
                          ("owner_bootstrap", 0), ("bayes_draws", 1), ("bayes_controls", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                kind = "a positive integer" if low else "a non-negative integer"
                raise DataError(f"The {name!r} parameter of AuditConfig must be {kind}. Got {value!r} instead.")
        if self.fixed_k is not None and (len(self.fixed_k) != 2 or min(self.fixed_k) < 1):
            raise DataError(f"The 'fixed_k' parameter of AuditConfig must be two positive integers (one per audit "
                            f"fold) or None. Got {self.fixed_k!r} instead.")
        if self.max_k is not None and (not isinstance(self.max_k, (int, np.integer)) or self.max_k < 1):
            raise DataError(f"The 'max_k' parameter of AuditConfig must be a positive integer or None. Got "
                            f"{self.max_k!r} instead.")
        for name, low, high in (("alpha", 0.0, 1.0), ("epsilon", 0.0, 1.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < value <= high:
                raise DataError(f"The {name!r} parameter of AuditConfig must be in ({low:g}, {high:g}]. Got {value!r} "
                                "instead.")
        if self.bayes_ability_spec is not None and (not isinstance(self.bayes_ability_spec, str)
                                                    or not self.bayes_ability_spec):
            raise DataError("The 'bayes_ability_spec' parameter of AuditConfig must be a spec name such as '2pl', the "
                            f"path of a 1PL-4PL spec file, or None. Got {self.bayes_ability_spec!r} instead.")
        for name, allowed in (("bayes_method", BAYES_METHODS), ("bayes_prior", BAYES_PRIORS),
                              ("adjustment", ADJUSTMENTS)):
            if getattr(self, name) not in allowed:
                raise DataError(f"The {name!r} parameter of AuditConfig must be one of {set(allowed)}. Got "
                                f"{getattr(self, name)!r} instead.")
        if self.bayes_prior == "hierarchical" and self.bayes_method in ("laplace", "bootstrap"):
            raise DataError(f"bayes_prior='hierarchical' learns the family-effect scale, which the {self.bayes_method} "
                            "layer does not; use bayes_method='advi' or 'nuts' with it, or the ridge prior")
        if self.bayes_method == "bootstrap" and self.adjustment != "spectral":
            raise DataError("bayes_method='bootstrap' refits the spectral offsets per draw; use adjustment='spectral' "
                            "with it, or another bayes_method")

    def resolved(self) -> AuditConfig:
        """The settings actually used (``quick`` applied)."""
        if not self.quick:
            return self
        return AuditConfig(**(asdict(self) | {"max_k": min(self.max_k or QUICK_MAX_K, QUICK_MAX_K),
                                               "controls": min(self.controls, QUICK_CONTROLS),
                                               "bootstrap": min(self.bootstrap, QUICK_CONTROLS),
                                               "owner_bootstrap": min(self.owner_bootstrap, QUICK_CONTROLS)}))


@dataclass
class FoldResult:
    """One outer fold: the audit half's choices and the target half's scores."""

    audit_fold: int
    selection: DimensionSelection
    purification: Purification
    target: pd.DataFrame  # model_id, family, owner, full, anchor, shift (one row per target representative)
    pairs: tuple[np.ndarray, np.ndarray]
    within_pairs: tuple[np.ndarray, np.ndarray]  # same family, different owner (NT D.1 eq. 51)
    eligible: int
    reversed: int
    tau_b: float
    all_cross_eligible: int
    all_cross_reversed: int
    target_index: np.ndarray  # positions of the target models in the Dataset
    posterior: xr.Dataset | None = None  # the Bayesian layer's per-draw chain (config.bayes)
    # its stacked draws: family_effect (draw, item, family), easiness (draw, item); in memory only, read by
    # bayesirt.audit.bayes_diagnostics (not written: (draw, item, family) is large on big item banks)
    draws: xr.Dataset | None = None
    schedule_gap: dict | None = None  # NT's five Newton cycles against the converged optimum


@dataclass
class AuditResult:
    """Everything the primary audit computed (written by :func:`bayesirt.audit.output.write_audit`)."""

    config: AuditConfig
    population: pd.DataFrame
    folds: list[FoldResult]
    summary: dict
    controls: xr.Dataset | None = None
    composition: xr.Dataset | None = None
    owners: xr.Dataset | None = None
    bayes: xr.DataTree | None = None
    sensitivity: xr.Dataset | None = None
    replication: dict[str, xr.Dataset] | None = None  # set by bayesirt.audit.robustness
    matched: xr.Dataset | None = None  # set by bayesirt.audit.robustness
    perturbations: pd.DataFrame | None = None  # set by bayesirt.audit.robustness
    profiles: xr.Dataset | None = None  # set by bayesirt.audit.robustness
    near_ties: pd.DataFrame | None = None  # the near-tie leaderboard (bayes; bayesirt.audit.near_ties)
    abilities: xr.DataTree | None = None  # its ability fit, in memory only (not written to audit.nc)
    warnings: list[str] = field(default_factory=list)
    timings: dict = field(default_factory=dict)


def input_sha256(responses: xr.Dataset) -> str:
    """SHA-256 of the response matrix and its labels (what the audit depends on)."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(responses["responses"].values).tobytes())
    for name in ("model_id", "family", "owner", "item_id", "item_group"):
        h.update("\x1f".join(map(str, responses[name].values)).encode())
    return h.hexdigest()


def check_audit(result, responses, caller: str, *, estimated: bool = True) -> None:
    """The one check of every diagnostic that reads a finished audit: ``result`` is an
    :class:`AuditResult`, ``responses`` is the very Dataset it ran on (same SHA-256), and, when
    ``estimated``, the audit had near-tie pairs."""
    if not isinstance(result, AuditResult):
        raise DataError(f"The 'result' parameter of {caller} must be the AuditResult of run_audit. Got "
                        f"{type(result).__name__} instead.")
    if not isinstance(responses, xr.Dataset) or "responses" not in responses:
        raise DataError(f"responses must be the response Dataset run_audit was given; got {type(responses).__name__}")
    if input_sha256(responses) != result.summary["input_sha256"]:
        raise DataError(f"responses is not the Dataset this audit ran on (its SHA-256 differs); {caller} reads it "
                        "alongside the audit: pass the Dataset run_audit was given")
    if estimated and result.summary["status"] != "estimated":
        raise DataError("the audit has no eligible near-tie pair (status not 'estimated'), so there is no reversal "
                        "rate to compare; rerun the audit on data with near ties")
