"""Which model pairs an ability test tells apart (SAFE "Ability shift", Fig. 5B): the share of pairs
distinguished per benchmark and on any, and the ability-matched pairs with their item disagreements."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.errors import DataError

__all__ = ["DISTINGUISH_Z", "pair_distinguishability", "ability_matched_pairs"]


def _fail(message: str) -> NoReturn:
    raise DataError(message)


#: Two-sided normal quantile at which a pair of models counts as distinguished on a benchmark.
DISTINGUISH_Z = 1.959963984540054


def pair_distinguishability(ability: pd.DataFrame, ability_sd: pd.DataFrame, *, z: float = DISTINGUISH_Z,
                            chunk: int = 500) -> pd.Series:
    """Share of model pairs each benchmark distinguishes, and the share distinguished on at least one
    (SAFE: 99.5% of pairs on at least one of eight benchmarks).

    A pair (a, b) is distinguished on benchmark j when |theta_a - theta_b| > z sqrt(sd_a^2 + sd_b^2)
    (ability estimates and posterior sds, independent posteriors); pairs are those of models
    observed on every benchmark (the complete cohort), so the shares are comparable.
    Returns a Series indexed by benchmark plus ``"any"``.
    """
    complete = ability.notna().all(axis=1) & ability_sd.notna().all(axis=1)
    est, sd = ability[complete].to_numpy(), ability_sd[complete].to_numpy()
    n = len(est)
    if n < 2:
        _fail("pair distinguishability needs two or more models observed on every benchmark")
    hits, either, pairs = np.zeros(est.shape[1]), 0, n * (n - 1) // 2
    for start in range(0, n, chunk):  # rows start..start+chunk against every later model
        rows = slice(start, min(start + chunk, n))
        gap = np.abs(est[rows, None, :] - est[None, :, :])
        sure = gap > z * np.sqrt(sd[rows, None, :] ** 2 + sd[None, :, :] ** 2)
        later = np.arange(n)[None, :] > np.arange(rows.start, rows.stop)[:, None]
        sure &= later[..., None]
        hits += sure.sum(axis=(0, 1))
        either += int(sure.any(axis=2).sum())
    return pd.Series(np.r_[hits, either] / pairs, index=[*ability.columns, "any"], name="share_distinguished")


def ability_matched_pairs(ability: pd.DataFrame, ability_sd: pd.DataFrame, datasets: Mapping[str, xr.Dataset], *,
                          z: float = DISTINGUISH_Z) -> tuple[pd.DataFrame, dict]:
    """SAFE Figure 5B: the model pairs a short ability test cannot separate on any benchmark, and how
    many individual items they still disagree on across the battery.

    ``ability``/``ability_sd``: short-test abilities and sds (models x benchmarks; the complete
    cohort is used). Disagreements count the items (of every dataset, matched by model id) both
    models answered, differently.

    Returns
    -------
    (pairs, summary)
        ``pairs``: ``model_a``, ``model_b``, ``largest_z`` (largest per-benchmark |gap| in combined
        sds), ``disagreements``, ``shared_items``; ``summary``: ``pairs`` (all), ``matched``,
        ``median_disagreements`` of the matched pairs and ``min_disagreements`` over all pairs.
    """
    complete = ability.notna().all(axis=1) & ability_sd.notna().all(axis=1)
    est, sd = ability[complete].to_numpy(), ability_sd[complete].to_numpy()
    models = ability.index[complete].astype(str)
    n = len(models)
    if n < 2:
        _fail("ability-matched pairs need two or more models observed on every benchmark")
    differ = np.zeros((n, n))
    shared = np.zeros((n, n))
    for ds in datasets.values():
        index = {str(m): k for k, m in enumerate(ds["model"].values)}
        cols = np.array([index.get(m, -1) for m in models])
        y = ds["responses"].values[:, np.maximum(cols, 0)].astype(float)
        y[:, cols < 0] = -1
        right, wrong = (y == 1).astype(float), (y == 0).astype(float)
        differ += right.T @ wrong + wrong.T @ right
        seen = right + wrong
        shared += seen.T @ seen
    gaps = np.stack([np.abs(est[:, None, j] - est[None, :, j]) / np.hypot(sd[:, None, j], sd[None, :, j])
                     for j in range(est.shape[1])]).max(axis=0)
    i, j = np.triu_indices(n, 1)
    matched = gaps[i, j] <= z
    pairs = pd.DataFrame({"model_a": models[i[matched]], "model_b": models[j[matched]],
                          "largest_z": gaps[i, j][matched], "disagreements": differ[i, j][matched].astype(int),
                          "shared_items": shared[i, j][matched].astype(int)})
    summary = {"pairs": int(i.size), "matched": int(matched.sum()),
               "distinguished_share": float(1 - matched.mean()),
               "median_disagreements": float(np.median(pairs["disagreements"])) if len(pairs) else float("nan"),
               "min_disagreements": int(differ[i, j].min())}
    return pairs.sort_values("disagreements", ignore_index=True), summary
