"""The item banks the SAFE suite's item-level steps run on, for several benchmarks (SAFE App. D).

SAFE calibrates one 2PL per benchmark and reads distillation, person fit and sandbagging per
benchmark; it builds composites only after aligning the benchmarks' directions (OR-Bench-Hard,
which measures refusal strictness reversed, is flipped), and one static test per latent ability
from the factor structure. :func:`benchmark_scopes` returns those banks:

- each benchmark alone, with its own item groups (e.g. harm categories) and its polarity;
- ``composite``: every benchmark pooled over the models they share, the responses of a benchmark
  of polarity -1 reversed (1 - y), so that every item points toward more of the ability;
- ``ability<f>``: for a retained, proper factor solution with two or more factors, the benchmarks whose
  largest absolute loading is on factor f, pooled the same way, each reversed when its loading
  on f is negative (a factor is first reflected so that most of its benchmarks load positively).

Polarity and the factor solution come from the ``factors`` step's folder
(:func:`bayesirt.jobs.suite.read_structure`);
without it, every benchmark has the declared polarity (default +1) and there are no ability banks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import xarray as xr

from bayesirt.data import make_responses
from bayesirt.errors import SpecError

__all__ = ["Scope", "pool_benchmarks", "benchmark_scopes"]

#: Common models needed to pool benchmarks.
MIN_COMMON_MODELS = 10


@dataclass(frozen=True)
class Scope:
    """One item bank: its ``responses``, the benchmarks it pools with their signs (``members``:
    name -> +1, or -1 when reversed), and ``polarity``: +1 when a high score means more of the
    ability (a pooled bank is aligned, so +1), -1 for a benchmark that measures it reversed."""

    name: str
    responses: xr.Dataset
    members: dict[str, int]
    polarity: int


def pool_benchmarks(datasets: Mapping[str, xr.Dataset], signs: Mapping[str, int] | None = None,
                    name: str | None = None) -> xr.Dataset:
    """One response Dataset of the items of every benchmark over the models all of them share;
    each item's ``item_group`` is its benchmark, its id ``benchmark:item``; the responses of a
    benchmark with sign -1 in ``signs`` are reversed."""
    signs = signs or {}
    if len(datasets) == 1 and signs.get(next(iter(datasets)), 1) == 1:
        return next(iter(datasets.values()))
    common = sorted(set.intersection(*(set(map(str, ds["model"].values)) for ds in datasets.values())))
    if len(common) < MIN_COMMON_MODELS:
        raise SpecError(f"the benchmark files share only {len(common)} models; pooling needs at least "
                        f"{MIN_COMMON_MODELS} common model ids (check that the files name models the same way)")
    blocks, item_ids, groups = [], [], []
    for bench, ds in datasets.items():
        index = {str(m): k for k, m in enumerate(ds["model"].values)}
        block = ds["responses"].values[:, [index[m] for m in common]]
        if signs.get(bench, 1) == -1:
            block = np.where(block >= 0, 1 - block, block).astype(block.dtype)
        blocks.append(block)
        item_ids += [f"{bench}:{i}" for i in ds["item"].values]
        groups += [bench] * ds.sizes["item"]
    pooled = make_responses(np.concatenate(blocks), item_id=item_ids, model_id=common, item_group=groups,
                            name=name or "+".join(datasets))
    pooled.attrs["item_group_is"] = "benchmark"  # the CAT target weighs the benchmarks equally
    return pooled


def benchmark_scopes(datasets: Mapping[str, xr.Dataset], polarity: Mapping[str, int],
                     clusters: Mapping[str, Mapping[str, int]] | None = None) -> list[Scope]:
    """The banks of the module docstring: one per benchmark, then (with two or more benchmarks)
    the sign-aligned ``composite`` and one per latent-ability cluster."""
    scopes = [Scope(name, ds, {name: 1}, int(polarity.get(name, 1))) for name, ds in datasets.items()]
    if len(datasets) < 2:
        return scopes
    taken = sorted(n for n in datasets if n == "composite" or (n.startswith("ability") and n[7:].isdigit()))
    if taken:
        raise SpecError(f"benchmark file names {taken} are the names of pooled item banks; rename those files")
    signs = {n: int(polarity.get(n, 1)) for n in datasets}
    scopes.append(Scope("composite", pool_benchmarks(datasets, signs, "composite"), signs, 1))
    for ability, members in (clusters or {}).items():
        members = {n: s for n, s in members.items() if n in datasets}
        if len(members) >= 2:
            scopes.append(Scope(ability, pool_benchmarks({n: datasets[n] for n in members}, members, ability),
                                dict(members), 1))
    return scopes
