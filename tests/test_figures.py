"""Every figure of a fit (abilities, item curves) and of the CAT study shows what the table written beside
it says: the plotted values are read back from the matplotlib artists of the figures the jobs write and
compared with the CSV files of the same folder. Labels stay inside the figure."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402
from matplotlib.collections import LineCollection, PolyCollection  # noqa: E402

from bayesirt.data.datasets.simulate import simulate_pl  # noqa: E402
from bayesirt.jobs.fit import run_fit_job  # noqa: E402
from bayesirt.jobs.safety import run_cat_job  # noqa: E402
from bayesirt.models.response import response_probability  # noqa: E402
from bayesirt.report.bank import plot_scores  # noqa: E402
from bayesirt.report.cat import bank_label  # noqa: E402
from bayesirt.report.figures import ability_forest_figure  # noqa: E402
from bayesirt.report.paging import MAX_FOREST_ROWS, forest_note, forest_rows  # noqa: E402


@pytest.fixture
def figures(monkeypatch):
    """The figures the code under test closes after saving, kept open for reading (name of the file -> Figure)."""
    kept = {}
    original_savefig, original_close = matplotlib.figure.Figure.savefig, plt.close

    def savefig(fig, path, *args, **kwargs):
        kept[getattr(path, "name", str(path))] = fig
        return original_savefig(fig, path, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    monkeypatch.setattr(plt, "close", lambda fig=None: None)
    yield kept
    for fig in kept.values():
        original_close(fig)


def _inside(fig) -> None:
    """Everything drawn (titles, tick labels, axis labels, legends) lies inside the figure."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    extents = [ax.get_tightbbox(renderer) for ax in fig.axes] + [t.get_window_extent(renderer) for t in fig.texts]
    if fig.get_suptitle():
        extents.append(fig._suptitle.get_window_extent(renderer))
    for ext in extents:
        assert ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1 and ext.y0 >= box.y0 - 1 and ext.y1 <= box.y1 + 1, (
            f"cut: {ext} outside {box}")


@pytest.fixture(scope="module")
def many_models(tmp_path_factory):
    """A 2PL fitted by ADVI to simulated data with more models than the forest plot draws."""
    ds, _ = simulate_pl("2pl", n_items=12, n_models=MAX_FOREST_ROWS + 25, seed=3)
    ds = ds.assign_coords(model_id=("model", [f"organisation-{k}/a-rather-long-model-name-v{k}-instruct-dpo"
                                              for k in range(ds.sizes["model"])]))
    return ds


@pytest.mark.slow
def test_fit_figures_match_models_and_items_csv(tmp_path, many_models, figures):
    out = run_fit_job(many_models, tmp_path / "fit", method="advi", draws=200, seed=2, progress=False,
                      advi_iterations=3000)
    models = pd.read_csv(out / "models.csv", dtype={"model_id": str})
    items = pd.read_csv(out / "items.csv", dtype={"item_id": str})

    # abilities: one interval and one point per drawn row, at evenly spaced ranks, best at the top
    fig = figures["abilities.png"]
    ax = fig.axes[0]
    rows = forest_rows(len(models))
    assert len(rows) == MAX_FOREST_ROWS < len(models) and rows[0] == 0 and rows[-1] == len(models) - 1
    shown = models.iloc[rows]
    (segments,) = [c for c in ax.collections if isinstance(c, LineCollection)]
    segs = np.array(segments.get_segments())  # (row, 2 ends, xy), drawn top (best) to bottom
    lo_col, hi_col = [c for c in models.columns if c.startswith("theta_q")][:2]
    order = np.argsort(-segs[:, 0, 1])
    np.testing.assert_allclose(segs[order, 0, 0], shown[lo_col], rtol=1e-12)
    np.testing.assert_allclose(segs[order, 1, 0], shown[hi_col], rtol=1e-12)
    (points,) = [line for line in ax.lines if line.get_marker() == "o"]
    x, y = points.get_data()
    np.testing.assert_allclose(np.asarray(x)[np.argsort(-np.asarray(y))], shown["theta_mean"], rtol=1e-12)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    ticks = np.asarray(ax.get_yticks())
    top_to_bottom = [labels[k] for k in np.argsort(-ticks)]
    assert [lab.split(". ", 1)[0] for lab in top_to_bottom] == [str(r + 1) for r in rows]
    assert top_to_bottom[0].endswith(models["model_id"].iloc[0][-10:])
    assert f"{MAX_FOREST_ROWS} of {len(models)} models" in fig.get_suptitle()
    _inside(fig)
    assert forest_note(len(models), "models", "models.csv") in (out / "report.md").read_text()

    # item curves: the most and least discriminating items of items.csv, the posterior mean curve of
    # posterior.nc's draws, and the models' posterior-mean abilities of models.csv as the rug
    fig = figures["item_curves.png"]
    tree = xr.open_datatree(out / "posterior.nc")
    post = tree["posterior"].to_dataset()
    ranked = items.sort_values("discrimination_mean", kind="stable")
    for ax, row in zip(fig.axes, (ranked.iloc[-1], ranked.iloc[0])):
        assert row["item_id"] in ax.get_title() and f"a = {row['discrimination_mean']:.2f}" in ax.get_title()
        curve, rug = ax.lines[0], ax.lines[1]
        grid, mean = curve.get_data()
        a = post["discrimination"].sel(item=row["item_id"]).values.reshape(-1)
        d = post["intercept"].sel(item=row["item_id"]).values.reshape(-1)
        pick = np.linspace(0, a.size - 1, min(400, a.size)).astype(int)
        expected = response_probability(np.asarray(grid), a[pick, None], d[pick, None], 0.0, 0.0)[:, 0, :].mean(axis=0)
        np.testing.assert_allclose(mean, expected, rtol=1e-10)
        np.testing.assert_allclose(np.sort(rug.get_xdata()), np.sort(models["theta_mean"]), rtol=1e-10)
        (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
        verts = band.get_paths()[0].vertices
        inside = np.isin(verts[:, 0], grid)
        assert np.all(verts[inside, 1] >= -1e-12) and np.all(verts[inside, 1] <= 1 + 1e-12)
    _inside(fig)


def test_forest_draws_every_model_when_few():
    models = pd.DataFrame({"model_id": list("abcde"), "theta_mean": [2.0, 1.0, 0.0, -1.0, -2.0],
                           "theta_q5": [1.5, 0.4, -0.5, -1.6, -2.9], "theta_q95": [2.4, 1.5, 0.6, -0.3, -1.1]})
    fig = ability_forest_figure(models, ci=0.9)
    ax = fig.axes[0]
    segs = np.array(ax.collections[0].get_segments())
    np.testing.assert_array_equal(segs[np.argsort(-segs[:, 0, 1]), :, 0], models[["theta_q5", "theta_q95"]])
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert [labels[k] for k in np.argsort(-np.asarray(ax.get_yticks()))] == list("abcde")  # best at the top
    assert "\n" not in fig.get_suptitle() and forest_note(5, "models", "models.csv") == ""
    _inside(fig)
    plt.close(fig)


@pytest.mark.slow
def test_cat_figure_matches_cat_curves_csv(tmp_path, figures):
    ds, _ = simulate_pl("2pl", n_items=40, n_models=40, seed=8)
    ds.attrs["name"] = "simulated bank"
    out = run_cat_job(ds, tmp_path / "cat", budgets=(5, 10, 20), splits=2, random_subsets=3, workers=1,
                      progress=False)
    curves = pd.read_csv(out / "cat_curves.csv")
    fig = figures["cat_curves.png"]
    assert len(fig.axes) == 2
    for ax, metric in zip(fig.axes, ("rmse", "spearman")):
        assert len(ax.lines) == 3
        for line, band, design in zip(ax.lines, [c for c in ax.collections if isinstance(c, PolyCollection)],
                                      ("cat", "static", "random")):
            table = curves.query("metric == @metric and design == @design").sort_values("budget")
            x, y = line.get_data()
            np.testing.assert_array_equal(x, table["budget"])
            np.testing.assert_allclose(y, table["mean"], rtol=1e-12)
            verts = band.get_paths()[0].vertices
            for budget, lower, upper in table[["budget", "lower", "upper"]].to_numpy():
                at = verts[np.isclose(verts[:, 0], budget), 1]
                np.testing.assert_allclose([at.min(), at.max()], [lower, upper], rtol=1e-12)
    attrs = xr.open_dataset(out / "cat.nc").attrs
    title = fig.axes[0].get_title()
    assert title == bank_label("all", attrs) == f"simulated bank: all {attrs['n_items']} items"
    assert f"## {title}" in (out / "report.md").read_text()
    _inside(fig)


@pytest.mark.slow
def test_cat_figure_is_paged_over_many_item_groups(tmp_path, figures):
    """Per-item-group curves of 8 groups: two pages (6 + 2 groups), every group's curve on its page and
    equal to cat_curves.csv; the report embeds both pages and says so."""
    ds, _ = simulate_pl("2pl", n_items=48, n_models=40, seed=9)
    ds = ds.assign_coords(item_group=("item", np.repeat([f"g{k}" for k in range(8)], 6)))
    out = run_cat_job(ds, tmp_path / "cat", budgets=(3,), splits=2, random_subsets=2, per_benchmark=True,
                      workers=1, progress=False)
    curves = pd.read_csv(out / "cat_curves.csv")
    pages = [figures["cat_curves.png"], figures["cat_curves_2.png"]]
    titles = [ax.get_title() for fig in pages for ax in fig.axes if ax.get_title()]
    assert titles == [f"g{k}" for k in range(8)] and [len(f.axes) for f in pages] == [12, 4]
    for fig in pages:
        for col, ax in enumerate(fig.axes[:len(fig.axes) // 2]):  # the RMSE row
            bench = ax.get_title()
            (y,) = ax.lines[0].get_ydata()
            expected = curves.query("benchmark == @bench and metric == 'rmse' and design == 'cat'")["mean"]
            np.testing.assert_allclose(y, expected.iloc[0], rtol=1e-12)
    report = (out / "report.md").read_text()
    assert "![CAT curves, page 2](cat_curves_2.png)" in report and "2 pages of at most 6 item groups" in report


def test_score_figure_draws_evenly_spaced_ranks_of_many_models(tmp_path, monkeypatch):
    """scores.png of 150 models: 60 rows at evenly spaced ranks of predicted accuracy (best and worst
    included), each point and interval equal to the table's, and a title saying so."""
    rng = np.random.default_rng(0)
    n = 150
    pred = rng.uniform(0.2, 0.8, n)
    scores = xr.Dataset({"predicted_accuracy": ("model", pred), "lower": ("model", pred - 0.05),
                         "upper": ("model", pred + 0.07), "person_fit_flag": ("model", np.zeros(n, bool)),
                         "outside_range": ("model", np.zeros(n, bool))},
                        coords={"model": [f"m{i}" for i in range(n)]})
    captured = {}
    real_savefig = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda fig, *a, **k: (captured.setdefault("fig", fig), real_savefig(fig, *a, **k)))
    plot_scores(scores, tmp_path / "scores.png", level=0.8)
    ax = captured["fig"].axes[0]
    x, y = ax.lines[0].get_xdata(), ax.lines[0].get_ydata()
    assert len(x) == 60 and "60 of 150 models" in ax.get_title()
    assert x[0] == pred.min() and x[-1] == pred.max() and np.all(np.diff(y) > 0)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    np.testing.assert_array_equal(x, pred[[int(m[1:]) for m in labels]])
    segs = ax.collections[0].get_segments()
    np.testing.assert_allclose([s[0][0] for s in segs], x - 0.05)
    np.testing.assert_allclose([s[1][0] for s in segs], x + 0.07)
    assert "80% interval" in ax.get_xlabel()
