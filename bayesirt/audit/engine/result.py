"""The audit's settings and results: :class:`AuditConfig` (NT's frozen specification, Table 12),
:class:`FoldResult`, :class:`AuditResult`, and the check every diagnostic makes of a finished audit."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from bayesirt.audit.engine.settings import ADJUSTMENTS, ANCHOR_FRACTION, EPSILON
from bayesirt.data.settings import POPULATION_SEED, REPRESENTATIVE_RULES
from bayesirt.errors import DataError
from bayesirt.utils.options import accept_renamed, comma_ints, comma_list, declare, none_or_text, option
from bayesirt.utils.validation import parameter_error

if TYPE_CHECKING:  # annotations only: the command line's parser reads AuditConfig without the audit's engine
    import pandas as pd
    import xarray as xr

    from bayesirt.audit.adjustment.spectral import DimensionSelection
    from bayesirt.audit.engine.anchors import Purification

__all__ = ["AuditConfig", "AuditResult", "FoldResult", "check_audit", "input_sha256", "QUICK_MAX_K", "QUICK_CONTROLS",
           "BAYES_CONTROLS", "BAYES_METHODS", "BAYES_PRIORS"]


BAYES_METHODS = ("laplace", "advi", "fullrank_advi", "nuts", "bootstrap")


BAYES_PRIORS = ("ridge", "hierarchical")


QUICK_MAX_K = 32


QUICK_CONTROLS = 199


#: Random controls per posterior draw and fold: the per-draw null of :func:`bayesirt.audit.bayes.posterior.propagate_posterior`
#: and the discrimination-matched controls of :mod:`bayesirt.audit.bayes.diagnostics`. 100: scoring them was
#: 61% of a --bayes audit's time at 200 (py-spy, 2,400 models x 1,267 items); against 1,000 per draw, 200 moved
#: each draw's excess by about 0.1 pp and 50 by about 0.2 pp, with a posterior SD of the excess of 1.2-1.4 pp.
BAYES_CONTROLS = 100


def _audit_rules(v: dict) -> str | None:
    """The rules across :class:`AuditConfig`'s fields."""
    caller = "AuditConfig"
    if v["families"] is not None:
        labels = () if isinstance(v["families"], str) else tuple(v["families"])
        if not labels or len(set(labels)) != len(labels) or not all(isinstance(f, str) and f for f in labels):
            raise parameter_error("families", caller, "None or a non-empty sequence of distinct, non-empty family "
                                  "labels such as ('Qwen', 'Llama')", v["families"])
    if v["fixed_k"] is not None and (isinstance(v["fixed_k"], str) or len(v["fixed_k"]) != 2):
        raise parameter_error("fixed_k", caller, "two positive integers (one per audit fold) or None", v["fixed_k"])
    spec = v["bayes_ability_spec"]
    if spec is not None and (not isinstance(spec, str) or not spec):
        raise parameter_error("bayes_ability_spec", caller, "a spec name such as '2pl', the path of a 1PL-4PL "
                              "spec file, or None", spec)
    if v["bayes_prior"] == "hierarchical" and v["bayes_method"] in ("laplace", "bootstrap"):
        return (f"bayes_prior='hierarchical' learns the family-effect scale, which the {v['bayes_method']} layer does "
                "not; use bayes_method='advi' or 'nuts' with it, or the ridge prior")
    if v["bayes_method"] == "bootstrap" and v["adjustment"] != "spectral":
        return ("bayes_method='bootstrap' refits the spectral offsets per draw; use adjustment='spectral' with it, or "
                "another bayes_method")
    return None


@accept_renamed
@dataclass(frozen=True)
@declare(check=_audit_rules, renamed={"alpha": "anchor_fraction", "bootstrap": "composition_bootstrap"})
class AuditConfig:
    """Settings of the primary audit; defaults are NT's frozen specification (Table 12).

    ``quick`` limits K to 32 and the controls to 199 (and the bootstrap to 199) for a fast look.
    ``families``, ``representative`` and ``lineage_filter`` select the population
    (:func:`bayesirt.data.populations.audit_population`): ``families=None`` (the default) audits
    every family label of the data except ``"other"`` and ``"ambiguous"``, labels used as given; a
    tuple of labels restricts the audit to them (``summary["families"]`` records the families
    actually audited). ``fixed_k`` freezes K per audit fold
    instead of selecting it (the population perturbations of NT D.2). ``composition_bootstrap = 0`` or
    ``owner_bootstrap = 0`` skips that bootstrap. ``adjustment`` is the ability adjustment:
    NT's spectral working model, "direct-mirt", the direct penalized joint MIRT of NT B.1
    (K selected by the same nested one-SE rule on its own held-out loss), or "bayes-mirt", the
    PyMC MIRT posterior means fitted by ADVI (:mod:`bayesirt.audit.adjustment.bayes_mirt`; K by the spectral
    rule).
    ``bayes`` adds the Bayesian layer (:mod:`bayesirt.audit.bayes.posterior`): the residual-DIF posterior of
    each audit half given its offsets (``bayes_method``: "laplace", per item, the default;
    "advi", "fullrank_advi" or "nuts"), or the
    owner-clustered Bayesian bootstrap that refits offsets, DIF and purification per draw with K
    fixed ("bootstrap", :mod:`bayesirt.audit.bayes.bootstrap`; ``bayes_prior`` unused); ``bayes_draws`` draws;
    ``bayes_prior``: "ridge", NT's lambda = 1 as an N(0, 1) prior, or "hierarchical", a learned
    scale) carried through anchors and reversals, and through the diagnostics
    (:mod:`bayesirt.audit.bayes.diagnostics`: within-family specificity always, the curves with
    ``sensitivity``, and, in :func:`bayesirt.jobs.audit.run_audit_job`, the signatures and the
    discrimination-matched controls, ``bayes_controls`` per draw, at most ``controls``), and the
    near-tie leaderboard (:mod:`bayesirt.audit.bayes.near_ties`): each eligible pair's posterior
    probability that the higher-scoring model has the higher expected accuracy (the paired model of
    :mod:`bayesirt.audit.bayes.paired`, which decides the categories), and, for reference,
    ``prob_theta_a_ahead`` from ``bayes_ability_spec`` (a built-in spec name or a 1PL-4PL spec file;
    default 2PL) fitted to the full benchmark on every retained model by ``bayes_method`` (full-rank
    ADVI there becomes mean-field ADVI) (``bayes_ability_spec=None`` skips the leaderboard).
    ``sensitivity`` adds the score-gap threshold and anchor-fraction curves
    (:mod:`bayesirt.audit.diagnostics.sensitivity`, NT B.4-B.5).
    """

    owner_cap: int = option(5, "checkpoints kept per owner and family", low=1)
    min_family_size: int = option(20, "smallest family kept, after the cap", low=1)
    families: tuple[str, ...] | None = option(None, "comma-separated family labels to audit, as in the data (case "
                                                    "matters), e.g. qwen,GPT [every label but other and ambiguous]",
                                              type=tuple, parse=comma_list)
    representative: str = option("median", "the target model of each owner and family: the checkpoint closest to "
                                           "the median accuracy, or the smallest model id (NT D.2)",
                                 choices=REPRESENTATIVE_RULES)
    lineage_filter: bool = option(False, "drop models whose ids contain a lineage term (merge, distill, ...; NT D.2)")
    fixed_k: tuple[int, int] | None = option(None, "K per audit fold instead of selecting it, e.g. 8,8", type=tuple,
                                             parse=comma_ints, low=1)
    anchor_fraction: float = option(ANCHOR_FRACTION, "anchor fraction kept in each blueprint cell", low=0, high=1, open="low")
    epsilon: float = EPSILON
    controls: int = option(1000, "matched-random subtests per fold", low=1)
    composition_bootstrap: int = option(2000, "composition bootstrap replicates (0: none)", low=0)
    owner_bootstrap: int = option(2000, "owner bootstrap replicates (0: none)", low=0)
    max_k: int | None = option(None, "largest K of the grid [256; 32 with --quick]", type=int, low=1)
    population_seed: int = option(POPULATION_SEED, "seed of the owner split into audit halves (NT's frozen value)", low=0)
    seed: int = option(0, "analysis seed (K split, SVD, controls, bootstraps)", low=0)
    quick: bool = option(False, "a fast look: K <= 32, 199 controls and bootstraps")
    bayes: bool = option(False, "add the Bayesian layer: residual-DIF posterior carried through anchors and reversals")
    bayes_method: str = option("laplace", "inference of the Bayesian layer: the residual-DIF posterior given the "
                                          "offsets (laplace: per-item Gaussian at the mode; advi, fullrank_advi, nuts), "
                                          "or the owner-clustered Bayesian bootstrap refitting offsets, DIF and "
                                          "purification per draw with K fixed (bootstrap)", choices=BAYES_METHODS)
    bayes_draws: int = option(400, "posterior draws of the Bayesian layer per audit half", low=1)
    bayes_prior: str = option("ridge", "prior on the family effects: NT's ridge as N(0, 1), or a learned common "
                                       "scale", choices=BAYES_PRIORS)
    bayes_controls: int = option(BAYES_CONTROLS, "with --bayes: random controls per posterior draw and fold (the "
                                                 "per-draw null; with --matched also the matched ones), at most "
                                                 "--controls", low=1)
    bayes_ability_spec: str | None = option("2pl", "with --bayes: ability spec of near_ties.csv's reference column "
                                                   "prob_theta_a_ahead (the categories use the paired accuracy "
                                                   "model); none skips the leaderboard", parse=none_or_text)
    adjustment: str = option("spectral", "ability adjustment: NT's spectral working model, direct penalized joint "
                                         "MIRT (B.1), or the PyMC MIRT posterior (ADVI; K by the spectral rule)",
                             choices=ADJUSTMENTS)
    sensitivity: bool = option(False, "add the score-gap threshold (0.25-5 pp) and anchor-fraction (30/50/70%) "
                                      "curves")

    def __post_init__(self):
        if self.families is not None:
            object.__setattr__(self, "families", tuple(self.families))  # a tuple, so the config stays hashable
        if self.fixed_k is not None:
            object.__setattr__(self, "fixed_k", tuple(int(k) for k in self.fixed_k))

    def resolved(self) -> AuditConfig:
        """The settings actually used (``quick`` applied)."""
        if not self.quick:
            return self
        return AuditConfig(**(asdict(self) | {"max_k": min(self.max_k or QUICK_MAX_K, QUICK_MAX_K),
                                               "controls": min(self.controls, QUICK_CONTROLS),
                                               "composition_bootstrap": min(self.composition_bootstrap, QUICK_CONTROLS),
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
    # bayesirt.audit.bayes.diagnostics (not written: (draw, item, family) is large on big item banks)
    draws: xr.Dataset | None = None
    schedule_gap: dict | None = None  # NT's five Newton cycles against the converged optimum
    # (model, model) accuracy gaps on the items both answered in the target half, the near ties' selection gaps with
    # missing cells (bayesirt.audit.engine.ranking.both_answered_gaps); None with complete data; in memory only
    pair_gaps: np.ndarray | None = None


@dataclass
class AuditResult:
    """Everything the primary audit computed (written by :func:`bayesirt.report.audit_files.write_audit`)."""

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
    near_ties: pd.DataFrame | None = None  # the near-tie leaderboard (bayes; bayesirt.audit.bayes.near_ties)
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
    import xarray as xr  # import time: this module declares AuditConfig, which the command line's parser reads

    if not isinstance(result, AuditResult):
        raise parameter_error("result", caller, "the AuditResult of run_audit", type(result).__name__)
    if not isinstance(responses, xr.Dataset) or "responses" not in responses:
        raise DataError(f"responses must be the response Dataset run_audit was given; got {type(responses).__name__}")
    if input_sha256(responses) != result.summary["input_sha256"]:
        raise DataError(f"responses is not the Dataset this audit ran on (its SHA-256 differs); {caller} reads it "
                        "alongside the audit: pass the Dataset run_audit was given")
    if estimated and result.summary["status"] != "estimated":
        raise DataError("the audit has no eligible near-tie pair (status not 'estimated'), so there is no reversal "
                        "rate to compare; rerun the audit on data with near ties")
