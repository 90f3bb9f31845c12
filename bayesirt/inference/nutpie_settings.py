"""nutpie's adaptation settings for NUTS on 1PL-4PL specs, by spec (recorded in a fit's settings)."""

from __future__ import annotations

__all__ = ["NUTPIE_SETTINGS", "ASYMPTOTE_TARGET_ACCEPT", "SPARSE_GUESSING_RESPONSES", "CONFIRMATORY_MIRT_TARGET_ACCEPT",
           "LEARNED_SCALE_DOUBLINGS", "responses_per_item", "spec_nutpie_settings"]

#: nutpie's adaptation for NUTS on 1PL-4PL and confirmatory MIRT specs (recorded in the fit's settings; exploratory
#: MIRT and the models of :func:`sample_model`'s other callers keep nutpie's defaults). A diagonal mass matrix
#: estimated from the variance of the draws, as Stan and PyMC adapt it ("draw_diag"), instead of nutpie's default
#: estimate from draws and gradients, with its estimator windows switched every 120 draws instead of 80. On a
#: 300 x 1,000 2PL, 2 chains x (500 + 500), the smallest bulk ESS over theta, a and d was 589 on average over 7
#: seeds (361-724) against 336 over 5 (270-359) at the default, for about 25% more gradient evaluations; switching
#: every 120 draws gave 776 and 732 where 80 gave 608 and 654 (benchmarks/README.md, "nuts_stan.py"). The step size
#: is not jittered between draws (Stan's default; nutpie jitters it by +-10%): over 6 seeds the smallest bulk ESS
#: rose from 3,798 to 4,597 in all and the ESS per sampling second from 33.3 to 35.8
#: (benchmarks/results/nutpie_adaptation.md).
NUTPIE_SETTINGS = {"adaptation": "draw_diag", "mass_matrix_switch_freq": 120, "step_size_jitter": 0.0}
#: The step size's target acceptance for specs with a guessing or slip asymptote but a sparse 3PL's
#: (:data:`SPARSE_GUESSING_RESPONSES`; nutpie's and Stan's default 0.8 otherwise). Their posteriors have curved
#: ridges (a hard item's intercept against its guessing) that the 2PL's lacks. On 200 x 500 3PLs from three
#: generator seeds, 2 chains x (500 + 500), 0.9 doubled the steps per draw (31 to 63, NumPyro's count at its default 0.8 on the same model) and the
#: smallest bulk ESS (293 to 600, 309 to 645, 241 to 487): 33-42% more ESS per gradient, tuning included,
#: and per CPU second (benchmarks/results/nutpie_adaptation_3pl.md and _3pl_probe.md).
ASYMPTOTE_TARGET_ACCEPT = 0.9
#: A 3PL (guessing, no slip) with fewer observed responses per item than this, on average, samples at nutpie's
#: default target instead (0.8). What the target buys is trajectory length: NUTS's trees are 31 or 63 leapfrog
#: steps here, and the slowest direction (a hard item's intercept against its guessing) needs about 5-6 units of
#: step size x steps. With many responses per item, 0.9 turns 31-step trees at step ~0.14 (length ~4.3) into 63-step
#: trees at ~0.095 (~6); with few, the smaller step still U-turns at 31-44 steps (length ~3.4-4.8) while 0.8's
#: larger step gives 31 steps at ~0.155 (~4.8). Smallest bulk ESS per 1,000 gradients, 0.8 against 0.9 (2 chains x
#: (500 + 500)), by mean responses per item: 100 (200 x 500 at 50% missing, 6 runs; 100 x 500 complete, generator
#: seeds 7, 11, 13): 7.03 / 3.44 and 7.04 / 3.37 (250 x 1,000 at 60% missing, seeds 7, 11, 13: 4.81 / 4.64, where 0.9
#: reached 63 steps); 120 (300 x 1,000 at 60% missing, seeds 7, 11, 13): 3.54 / 4.48;
#: 130 (200 x 500 at 35% missing): 5.85 / 5.97; 160 (20% missing): 4.15 / 5.56; 200 (200 x 500 complete; 400 x 500
#: at 50% missing, seeds 7, 11, 13): 3.15 / 4.21 and 3.33 / 4.46 (benchmarks/results/nutpie_adaptation_3pl*.md).
#: That responses per item decide, not the missing share, was read off the 200 x 500 runs; the runs at generator
#: seeds 7, 11, 13 and other sizes tested it (the threshold was set before the 300 x 1,000 run).
#: The 4PL keeps 0.9 at 100 responses per item too (4.60 / 5.71 at 50% missing:
#: benchmarks/results/nutpie_adaptation_4pl_missing50.md).
SPARSE_GUESSING_RESPONSES = 120
#: The target acceptance for confirmatory MIRT, with :data:`NUTPIE_SETTINGS`' adaptation (exploratory MIRT
#: keeps nutpie's defaults). The factor correlation mixes slowest; on the 200 x 500 2-D data of
#: ``benchmarks/_nuts_families.py`` (data seeds 20261129-31, sampler seed 1, 2 chains x (500 + 500)) the summed
#: smallest bulk ESS was, at nutpie's defaults / NUTPIE_SETTINGS / with this target: 91 / 166 / 227 on complete
#: matrices (6.8 / 9.5 / 10.1 per sampling second) and 214 / 195 / 433 at 50% missing (14.7 / 11.9 / 18.2)
#: (benchmarks/results/nutpie_adaptation_mirt_confirmatory_complete.md and _missing50.md). Exploratory fits
#: mix badly at any setting: their chains stay in separate modes (sign-aligned R-hat up to 1.6-2.2).
CONFIRMATORY_MIRT_TARGET_ACCEPT = 0.9
#: Tree doublings past the U-turn (nutpie's ``extra_doublings``) for a spec whose slopes' scale is learned
#: (``IRTSpec.learned_slope_scale``; the slopes' location mixes slowest). On the 200 x 500 data of
#: ``benchmarks/_nuts_families.py`` (data seeds 20261129-31, sampler seeds 1-2, 2 chains x (500 + 500)) one doubling
#: took the summed smallest bulk ESS from 1,618 to 3,634 on complete matrices (smallest run 98 to 544) and from 1,820
#: to 3,196 at 50% missing (197 to 457), for 1.8x the gradients: ESS per sampling second 1.13x and 0.84x, per wall
#: second with the compile 1.3-1.6x, and twice the ESS from the same draws
#: (benchmarks/results/nutpie_adaptation_hierarchical_complete.md and _missing50.md).
LEARNED_SCALE_DOUBLINGS = 1


def responses_per_item(responses) -> float:
    """The observed responses per item of a responses Dataset (``responses``, item x model, negative where
    missing), on average: the count :func:`spec_nutpie_settings` compares with :data:`SPARSE_GUESSING_RESPONSES`."""
    y = responses["responses"].values
    return float((y >= 0).sum() / max(1, y.shape[0]))


def spec_nutpie_settings(spec, per_item: float) -> dict | None:
    """nutpie's settings for NUTS on ``spec`` fitted to responses with ``per_item`` observed responses per item on
    average (:func:`responses_per_item`): :data:`NUTPIE_SETTINGS`, with :data:`ASYMPTOTE_TARGET_ACCEPT` for a spec
    with a guessing or slip asymptote (but a 3PL with fewer than :data:`SPARSE_GUESSING_RESPONSES` per item) and
    :data:`LEARNED_SCALE_DOUBLINGS` for one whose slopes' scale is learned, or
    :data:`CONFIRMATORY_MIRT_TARGET_ACCEPT` for confirmatory MIRT; None (nutpie's defaults) for exploratory
    MIRT."""
    if spec.kind == "mirt":
        if spec.structure != "confirmatory":
            return None
        return NUTPIE_SETTINGS | {"target_accept": CONFIRMATORY_MIRT_TARGET_ACCEPT}
    settings = dict(NUTPIE_SETTINGS)
    sparse_guessing = spec.has_guessing and not spec.has_slip and per_item < SPARSE_GUESSING_RESPONSES
    if (spec.has_guessing or spec.has_slip) and not sparse_guessing:
        settings["target_accept"] = ASYMPTOTE_TARGET_ACCEPT
    if spec.learned_slope_scale:
        settings["extra_doublings"] = LEARNED_SCALE_DOUBLINGS
    return settings
