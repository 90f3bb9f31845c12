"""The Bayesian ability adjustment of the audit (``--adjustment bayes-mirt``).

In each purification round the capability offsets o_im = a_i . theta_m come from the PyMC
exploratory MIRT (:mod:`bayesirt.models.mirt`, priors of ``models/mirt.toml``: loadings
N(0, 1.5^2), intercepts N(0, 2^2), theta ~ N(0, I)) fitted by mean-field ADVI to the round's
selection rows S, instead of NT's spectral working model (C.2) or the direct penalized joint MIRT
(B.1). The posterior-mean abilities (centred) are the coordinates; every item's loading is then
fitted with those coordinates fixed, exactly as the direct adjustment does
(:func:`bayesirt.audit.adjustment.joint_mirt.fit_item_parameters`), and the offsets are clipped to
+/-6 like the others. The dimension K is chosen by the spectral nested one-SE rule (C.3): a PyMC
fit per candidate K would multiply the cost by the size of the K grid.
"""

from __future__ import annotations


import numpy as np
from scipy.special import logit

from bayesirt.audit.adjustment.joint_mirt import fit_item_parameters
from bayesirt.audit.adjustment.spectral import MAX_OFFSET, working_responses
from bayesirt.data.responses import MISSING, make_responses
from bayesirt.inference.fitting import fit
from bayesirt.models.specs import load_spec
from bayesirt.errors import warn

__all__ = ["bayes_mirt_offsets", "ADVI_DRAWS"]

#: Draws taken from the ADVI approximation for the posterior means.
ADVI_DRAWS = 200


def bayes_mirt_offsets(y: np.ndarray, observed: np.ndarray, fit_items: np.ndarray, k: int, *, seed: int,
                       threads: int | None = 1) -> tuple[np.ndarray, int]:
    """Capability offsets clip(a_i . theta_m, -6, 6) (item, model) from the PyMC MIRT, and the rank.

    Same contract as :func:`bayesirt.audit.adjustment.spectral.spectral_offsets` and
    :func:`bayesirt.audit.adjustment.joint_mirt.direct_offsets`: ``fit_items`` (indices or mask) are
    the rows whose fit gives the coordinates; ``k`` is lowered to what those rows identify.
    """
    y, observed = np.asarray(y, dtype=np.float64), np.asarray(observed, dtype=bool)
    rows = np.arange(y.shape[0])[np.asarray(fit_items)]
    rank = int(max(1, min(k, rows.size - 1, y.shape[1] - 1)))
    codes = np.where(observed[rows], y[rows], MISSING).astype(np.int8)
    spec = load_spec("mirt").with_dimensions(rank)
    tree = fit(make_responses(codes), spec, method="advi", draws=ADVI_DRAWS, seed=seed, progress=False)
    post = tree["posterior"]
    theta = post["theta"].mean(("chain", "draw")).values
    theta = theta - theta.mean(axis=0)
    loading = np.zeros((y.shape[0], rank))
    loading[rows] = post["loading"].mean(("chain", "draw")).values
    intercept = logit(working_responses(np.where(observed, y, 0.0), observed)[1])
    intercept[rows] = post["intercept"].mean(("chain", "draw")).values
    items = fit_item_parameters(y, observed, theta, intercept, loading, threads=threads)
    if not (int(tree.attrs.get("advi_converged", 1)) and items.converged):
        warn(f"Bayesian MIRT offsets at K={rank}: ADVI or the item fit hit its iteration cap")
    return np.clip(items.loading @ theta.T, -MAX_OFFSET, MAX_OFFSET), rank
