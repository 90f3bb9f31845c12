"""Within-family specificity of the near-tie effect (NT 4.2, B.3, D.1 eq. 51-55).

The frozen low-DIF weights and the same matched-random replicates are applied to near ties of
different owners in the *same* family. Within excess and p compare those pairs' low-DIF reversal
rate with the replicates (eq. 51-52); the specificity statistic compares the cross-minus-within
gap G = T_cross - T_within with the same replicates' gaps G_r, paired by replicate index
(eq. 53-55). A post-hoc diagnostic, as in the paper, not a confirmatory estimand.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from bayesirt.audit.engine.resampling import PRIMARY, randomization_summary

__all__ = ["WITHIN", "within_family_specificity"]

WITHIN = "within"
"""Name of the same-family pair set in the controls' ``pair_set`` coordinate."""


def within_family_specificity(controls: xr.Dataset) -> dict:
    """Within-family excess and the paired cross-minus-within specificity test.

    Parameters
    ----------
    controls : xarray.Dataset
        :func:`bayesirt.audit.engine.resampling.matched_random_controls` run with the primary (cross-family)
        pairs and a ``"within"`` extra pair set.

    Returns
    -------
    dict
        ``within_pairs`` (pooled eligible same-family pairs), ``within_rate`` (low-DIF),
        ``within_median`` (matched-random), ``within_excess_pp``, ``within_p`` (eq. 51-52),
        ``gap_pp`` = 100 G_DIF, ``gap_median_pp``, ``specificity_pp`` (Delta_spec, eq. 54) and
        ``specificity_p`` (eq. 55). NaN where a pair set has no eligible pair.
    """
    cross, within = controls.sel(pair_set=PRIMARY), controls.sel(pair_set=WITHIN)
    gap = float(cross["observed_rate"]) - float(within["observed_rate"])
    gaps = cross["rate"].values - within["rate"].values  # paired by replicate index
    paired = randomization_summary(gap, gaps)
    return {
        "within_pairs": int(within["observed_eligible"].sum()),
        "within_rate": float(within["observed_rate"]),
        "within_median": float(within["median"]),
        "within_excess_pp": float(within["excess_pp"]),
        "within_p": float(within["p_value"]),
        "gap_pp": 100 * gap,
        "gap_median_pp": 100 * paired["median"] if np.isfinite(paired["median"]) else np.nan,
        "specificity_pp": paired["excess_pp"],
        "specificity_p": paired["p_value"],
    }
