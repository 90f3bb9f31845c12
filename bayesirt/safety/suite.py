"""The SAFE pipeline for a set of benchmark files, as one declared analysis (``kind = "safety"``).

Steps, each written to its own subfolder of the output folder by its own job:

- ``information``: item and test information of the pooled items (regularized MML 2PL);
- ``cat``: the held-out adaptive-testing study (SAFE Figure 3);
- ``personfit``: l_z with a cut-off calibrated on the genuine cohort;
- ``sandbag``: sandbagging simulation and detection;
- ``factors``: per-benchmark 2PL abilities and their factor structure (needs three or more files).

Several benchmark files are pooled for the item-level steps by joining on the models they share
(inner join; the benchmark name becomes each item's ``item_group``, so CAT quotas and targeted
sandbagging work per benchmark). The folder appears only when every step has finished.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from bayesirt.data import load, make_responses
from bayesirt.errors import SpecError
from bayesirt.utils.outputs import staged_output

__all__ = ["SAFETY_STEPS", "pool_benchmarks", "run_safety_suite"]

SAFETY_STEPS = ("information", "cat", "personfit", "sandbag", "factors")


def pool_benchmarks(files: list[str]) -> xr.Dataset:
    """One response Dataset of the items of every file over the models all files share."""
    sets = {Path(f).stem: load(f) for f in files}
    if len(sets) == 1:
        return next(iter(sets.values()))
    common = sorted(set.intersection(*(set(map(str, ds["model"].values)) for ds in sets.values())))
    if len(common) < 10:
        raise SpecError(f"the benchmark files share only {len(common)} models; pooling needs at least 10 common "
                        "model ids (check that the files name models the same way)")
    blocks, item_ids, groups = [], [], []
    for name, ds in sets.items():
        index = {str(m): k for k, m in enumerate(ds["model"].values)}
        blocks.append(ds["responses"].values[:, [index[m] for m in common]])
        item_ids += [f"{name}:{i}" for i in ds["item"].values]
        groups += [name] * ds.sizes["item"]
    return make_responses(np.concatenate(blocks), item_id=item_ids, model_id=common, item_group=groups,
                          name="+".join(sets))


def run_safety_suite(files: list[str], out, *, steps=SAFETY_STEPS, options: dict | None = None, force: bool = False,
                     progress: bool = True) -> Path:
    """Run the declared SAFE steps on benchmark ``files``; one subfolder per step under ``out``.

    ``options`` maps a step name to the keyword options of its job (e.g. ``{"cat": {"budgets":
    [10, 25]}}``), as the analysis file's ``[safety.<step>]`` tables give them.
    """
    from bayesirt.structure.ability_structure import run_factors_job
    from bayesirt.safety.cat_study import run_cat_job, run_information_job
    from bayesirt.safety.personfit import run_personfit_job
    from bayesirt.safety.sandbagging import run_sandbag_job

    options = options or {}
    unknown = set(steps) - set(SAFETY_STEPS) | set(options) - set(SAFETY_STEPS)
    if unknown:
        raise SpecError(f"unknown safety step(s) {sorted(unknown)}; the steps are {list(SAFETY_STEPS)}")
    if "factors" in steps and len(files) < 3:
        raise SpecError(f"the factors step needs three or more benchmark files; got {len(files)} (drop 'factors' "
                        "from steps or add files)")
    pooled = pool_benchmarks(files) if set(steps) - {"factors"} else None
    jobs = {
        "information": lambda target, kw: run_information_job(pooled, target, **kw),
        "cat": lambda target, kw: run_cat_job(pooled, target, progress=progress, **kw),
        "personfit": lambda target, kw: run_personfit_job(pooled, target, progress=progress, **kw),
        "sandbag": lambda target, kw: run_sandbag_job(pooled, target, progress=progress, **kw),
        "factors": lambda target, kw: run_factors_job(files, target, progress=progress, **kw),
    }
    with staged_output(out, force=force) as folder:
        for step in steps:
            kw = dict(options.get(step, {}))
            for key in ("budgets", "n_factors", "strengths"):
                if key in kw:
                    kw[key] = tuple(kw[key])
            jobs[step](folder / step, kw)
        lines = ["# SAFE pipeline", "", f"Benchmarks: {', '.join(Path(f).stem for f in files)}", "",
                 *[f"- [{step}]({step}/report.md)" for step in steps]]
        (folder / "report.md").write_text("\n".join(lines) + "\n")
    return Path(out)
