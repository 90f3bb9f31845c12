"""Confirmatory 4-dimension MIRT on the ICAR ability items (skipped when ../shared/data is absent).

ability.csv: 1,525 people x 16 items of four types (reason, letter, matrix, rotate), with missing
cells. The confirmatory spec maps each item to its type; the report must show the six factor
correlations with intervals. ICAR's four item types measure correlated facets of general
ability, so every correlation is expected to be clearly positive.
"""

from __future__ import annotations

import arviz as az
import pandas as pd
import xarray as xr

from bayesirt.jobs.fit import run_fit_job
from bayesirt.data import load

from test_real_data import _file  # noqa: E402  (same folder)


def test_confirmatory_four_factor_fit_reports_factor_correlations(tmp_path):
    ds = load(_file("human/ability.csv"), orientation="models_by_items", drop_empty=True)  # 16 people answered nothing
    types = [str(item).split(".")[0] for item in ds["item"].values]
    ds = ds.assign_coords(item_group=("item", types))
    assert (ds["responses"].values == -1).any()  # the file has missing cells
    out = run_fit_job(ds, tmp_path / "icar", spec="mirt-confirmatory", method="nuts", draws=1000, tune=1000, chains=2,
                      seed=1, progress=False)
    corr = pd.read_csv(out / "factor_correlations.csv")
    assert len(corr) == 6 and (corr["lower"] > 0).all(), corr
    assert "## Factor correlations" in (out / "report.md").read_text()
    posterior = xr.open_datatree(out / "posterior.nc", engine="h5netcdf")["posterior"].to_dataset()
    rhat = az.rhat(posterior[["slope", "intercept", "factor_correlation"]])
    worst = max(float(rhat[v].max(skipna=True)) for v in rhat.data_vars)  # the unit diagonal has no R-hat
    print(corr.round(3).to_string(), f"\nmax R-hat {worst:.3f}")
    assert worst < 1.05
