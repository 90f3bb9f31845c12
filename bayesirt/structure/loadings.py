"""Loadings of a fitted exploratory MIRT posterior: each draw rotated (oblimin or varimax) and aligned
to a common orientation, and the table of loadings with credible intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.models.rotation import align_loadings, align_phi, rotate

__all__ = ["rotate_posterior", "loading_table"]


def rotate_posterior(posterior: xr.Dataset, method: str = "oblimin", *, max_draws: int = 500) -> xr.Dataset:
    """Rotate every posterior draw of the loadings and align it to the rotated posterior mean.

    The posterior-mean loadings are rotated (:func:`bayesirt.models.rotation.rotate`; varimax or oblimin)
    to give the target; each draw is rotated the same way and its factors permuted and reflected
    to the target by Tucker congruence (:func:`bayesirt.models.rotation.align_loadings`), so rotation,
    order and sign agree across draws and chains. At most ``max_draws`` draws (evenly thinned).

    Returns
    -------
    xarray.Dataset
        ``loading`` (sample, item, dim) and ``factor_correlation`` (sample, dim, dim_bis) of the
        rotated draws, and ``congruence`` (sample, dim) of each draw with the target.
    """
    loading = posterior["loading"].stack(sample=("chain", "draw")).transpose("sample", "item", "dim")
    step = max(1, int(np.ceil(loading.sizes["sample"] / max_draws)))
    draws = loading.values[::step]
    target = rotate(loading.mean("sample").values, method)
    rotated = rotate(draws, method)
    aligned, perm, signs, congruence = align_loadings(rotated.loadings, target.loadings)
    phi = align_phi(rotated.phi, perm, signs)
    coords = {"item": loading["item"].values, "dim": loading["dim"].values, "dim_bis": loading["dim"].values}
    return xr.Dataset({"loading": (("sample", "item", "dim"), aligned),
                       "factor_correlation": (("sample", "dim", "dim_bis"), phi),
                       "congruence": (("sample", "dim"), congruence)}, coords=coords, attrs={"rotation": method})


def loading_table(tree: xr.DataTree, *, rotation: str | None = None, ci: float = 0.94) -> pd.DataFrame:
    """Posterior mean, sd and equal-tailed ``ci`` interval of every loading (long format).

    With ``rotation`` (``"varimax"`` or ``"oblimin"``), of the rotated, aligned draws
    (:func:`rotate_posterior`); otherwise in the identified (echelon or confirmatory) frame.
    """
    posterior = tree["posterior"].to_dataset()
    if rotation is None:
        draws = posterior["loading"].stack(sample=("chain", "draw"))
    else:
        draws = rotate_posterior(posterior, rotation)["loading"]
    tail = (1 - ci) / 2
    table = xr.Dataset({"mean": draws.mean("sample"), "sd": draws.std("sample"),
                        "lower": draws.quantile(tail, "sample").drop_vars("quantile"),
                        "upper": draws.quantile(1 - tail, "sample").drop_vars("quantile")})
    keep = [c for c in table.coords if c not in ("item", "dim")]
    frame = table.drop_vars(keep).to_dataframe().reset_index()
    return frame[["item", "dim", "mean", "sd", "lower", "upper"]]
