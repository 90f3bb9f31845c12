"""The nested 1PL/2PL/3PL/4PL model ladder of SAFE Appendix E, fitted by marginal ML.

Each rung is fitted with :func:`~bayesirt.frequentist.mml.fit_mml` on the built-in specs
``"rasch"`` (common slope), ``"2pl"``, ``"3pl"`` and ``"4pl"`` with ``priors=False``. As in
SAFE App. E, the 3PL/4PL asymptotes keep the spec's Beta priors so that they stay inside the
unit interval: those two fits are MAP, not ML, and their likelihood-based criteria are
approximate (flagged in the ``map_asymptotes`` column). AIC = -2 LL + 2k and BIC = -2 LL + k
log(n), with n the number of models (respondents), the usual convention for marginal fits.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from bayesirt.frequentist.mml import fit_mml
from bayesirt.errors import warn

__all__ = ["RUNGS", "BOUNDARY_CAVEAT", "pl_ladder", "information_criteria"]

RUNGS = (("1pl", "rasch"), ("2pl", "2pl"), ("3pl", "3pl"), ("4pl", "4pl"))
"""(model label, built-in spec name) of each rung, simplest first."""

BOUNDARY_CAVEAT = (
    "the 3PL/4PL asymptotes lie on the boundary under the null and carry priors, so the chi-square "
    "reference is conservative and approximate"
)
_REGULAR = "regular nested test (the common slope is interior to the 2PL); chi-square reference applies"


def information_criteria(loglik: float, n_parameters: int, n_models: int) -> dict[str, float]:
    """AIC = -2 LL + 2k and BIC = -2 LL + k log(n), n = number of models (respondents)."""
    return {"aic": -2 * loglik + 2 * n_parameters, "bic": -2 * loglik + n_parameters * np.log(n_models)}


def _best_fit(responses, spec, previous, **options):
    """Fit ``spec`` from its default start and, for the rungs with asymptotes, also warm-started
    from the previous rung; keep the higher objective. EM finds a local optimum, and on data
    near the guessing rate the default 3PL start can end far below the nested 2PL (BBH)."""
    starts = [("default", None)]
    if previous is not None and spec in ("3pl", "4pl"):
        starts.append((f"from {previous[0]}", previous[1]))
    best = None
    for name, start in starts:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit = fit_mml(responses, spec, start=start, **options)
        if best is None or fit.objective > best[0].objective:
            best = (fit, name, caught)
    return best


def pl_ladder(
    responses: xr.Dataset,
    *,
    quadrature: int = 61,
    max_iter: int = 500,
    tol: float = 1e-6,
    threads: int | None = 1,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fit the 1PL, 2PL, 3PL and 4PL by MML and compare them (SAFE App. E).

    Parameters
    ----------
    responses : xarray.Dataset
        Response Dataset (``responses`` (item, model), -1 missing).
    quadrature, max_iter, tol, threads
        Passed to :func:`~bayesirt.frequentist.mml.fit_mml` (standard errors are not computed).

    Returns
    -------
    table : pandas.DataFrame
        One row per rung: ``model`` (1pl..4pl), ``spec``, ``loglik`` (marginal, without
        priors), ``n_parameters``, ``aic``, ``bic``, ``iterations``, ``converged``,
        ``map_asymptotes`` (True when Beta priors on the asymptotes make the fit MAP), ``start``
        (3PL/4PL: fitted from the default start and warm-started from the rung below; the
        higher objective is kept and this names its start).
        ``attrs["n"]`` is the n of the BIC.
    lrt : pandas.DataFrame
        One row per adjacent pair (``1pl->2pl``, ``2pl->3pl``, ``3pl->4pl``): ``null``,
        ``alternative``, ``statistic`` = 2 (LL_alt - LL_null), ``df``, ``p`` (chi-square upper
        tail of ``max(statistic, 0)``) and ``note``, the boundary caveat for the rungs with
        asymptotes. A negative statistic (possible for MAP fits) is kept as computed.

    Warns
    -----
    RuntimeWarning
        Passed on from the fits (iteration cap, parameters at a bound), prefixed by the rung.
    """
    n = int(responses.sizes["model"])
    rows, previous = [], None
    for label, spec in RUNGS:
        fit, start, caught = _best_fit(responses, spec, previous, quadrature=quadrature, max_iter=max_iter, tol=tol,
                                       se=False, threads=threads)
        for w in caught:
            warn(f"pl_ladder {label}: {w.message}", w.category)
        k = fit.n_parameters
        rows.append({
            "model": label, "spec": spec, "loglik": fit.loglik, "n_parameters": k,
            **information_criteria(fit.loglik, k, n),
            "iterations": fit.iterations, "converged": fit.converged,
            "map_asymptotes": bool(fit.attrs["map_asymptotes"]), "start": start,
        })
        previous = (label, fit)
    table = pd.DataFrame(rows)
    table.attrs.update(n=n, bic_n="number of models (respondents)", note=BOUNDARY_CAVEAT)
    tests = []
    for lo, hi in zip(rows[:-1], rows[1:], strict=True):
        stat = 2.0 * (hi["loglik"] - lo["loglik"])
        df = hi["n_parameters"] - lo["n_parameters"]
        tests.append({
            "comparison": f"{lo['model']}->{hi['model']}", "null": lo["model"], "alternative": hi["model"],
            "statistic": stat, "df": df, "p": float(stats.chi2.sf(max(stat, 0.0), df)),
            "note": BOUNDARY_CAVEAT if hi["map_asymptotes"] else _REGULAR,
        })
    return table, pd.DataFrame(tests)
