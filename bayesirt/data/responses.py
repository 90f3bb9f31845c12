"""The response Dataset: one binary item x model matrix with its ids and metadata.

Every reader in :mod:`bayesirt.data` ends in :func:`make_responses`, so all validation of
response data lives here. The layout is

- data variable ``responses`` with dims ``("item", "model")``, dtype ``int8``: 1 = correct,
  0 = incorrect, ``MISSING`` (-1) = not observed; ``responses.attrs["missing_code"] == -1``;
- index coordinates ``item`` and ``model`` (string ids), so ``ds.sel(model="GPT-4o")`` works and
  posterior draws with coords ``{"item": ids, "model": ids}`` align by coordinate;
- non-index coordinates ``item_id`` (item), ``model_id`` (model) mirroring the indexes,
  ``item_group`` (item), ``family`` (model) and ``owner`` (model), and, when given, ``testlet``
  (item: items sharing a stem, passage or scenario);
- Dataset attrs ``name`` and ``source`` when known.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from bayesirt.data.families import derive_family, derive_owner
from bayesirt.errors import DataError

__all__ = ["MISSING", "make_responses", "validate_responses", "summarize", "observed_mask", "observed_cells",
           "informative_items", "drop_constant_items", "to_observed_data", "from_observed_data", "METADATA",
           "OPTIONAL_METADATA", "testlet_labels"]

MISSING = -1
"""Code of a missing (unobserved) cell in the int8 ``responses`` variable."""

_DEFAULT_GROUP = "all"


def _fmt(value: Any) -> str:
    """Short display of one offending cell value."""
    if isinstance(value, (float, np.floating)):
        return f"{float(value):g}"
    if isinstance(value, str):
        return repr(value)
    return " ".join(str(value).split())  # e.g. an array in an object cell prints on several lines


#: The fix named first for multiple-choice answers (integer codes 0, 2, 3, ... or letters): an answer key.
_KEY_FIRST = ("they look like multiple-choice answers: pass --key KEY.csv (key=, a CSV with columns item_id,key) "
              "to score each answer 1 where it equals its item's key; otherwise ")


def _is_answer(value: Any) -> bool:
    """True for a cell that reads as a multiple-choice answer: one letter."""
    return isinstance(value, str) and len(value.strip()) == 1 and value.strip().isalpha()


def _as_matrix(matrix: Any) -> np.ndarray:
    """Array-like -> ndarray with shape checks (empty, not 2-D, one item, one model)."""
    if isinstance(matrix, (xr.DataArray, pd.DataFrame)):
        matrix = matrix.to_numpy()
    try:
        arr = np.asarray(matrix)
    except ValueError:  # ragged nested lists
        raise DataError(
            "responses matrix has rows of different lengths; pass a rectangular items x models matrix"
        ) from None
    if arr.size == 0:
        raise DataError(f"responses matrix is empty (shape {arr.shape}); pass at least 2 items and 2 models")
    if arr.ndim != 2:
        raise DataError(
            f"responses must be a 2-D items x models matrix, got {arr.ndim} dimension(s) (shape {arr.shape}); "
            "pass one matrix with items as rows and models as columns"
        )
    n_items, n_models = arr.shape
    if n_items < 2:
        raise DataError(
            f"responses have only one item (shape {arr.shape}); IRT needs at least 2 items "
            "(if items are columns, transpose the matrix)"
        )
    if n_models < 2:
        raise DataError(
            f"responses have only one model (shape {arr.shape}); IRT needs at least 2 models "
            "(if models are rows, transpose the matrix)"
        )
    return arr


def _as_ids(values: Any, n: int, what: str, noun: str) -> np.ndarray:
    """Ids as a unicode array of length ``n``: checked for length, blanks and duplicates."""
    if values is None:
        return np.array([str(i) for i in range(n)], dtype=str)
    arr = np.asarray(values, dtype=object)
    if arr.ndim != 1:
        raise DataError(f"{what} must be one-dimensional, got shape {arr.shape}; pass one id per {noun}")
    if len(arr) != n:
        raise DataError(
            f"{what} has {len(arr)} entries but the matrix has {n} {noun}s; pass exactly one id per {noun}"
        )
    ids = []
    for pos, value in enumerate(arr):
        if isinstance(value, bytes):
            value = value.decode("utf-8", errors="replace")
        if value is None or (not isinstance(value, str) and pd.isna(value)) or not str(value).strip():
            raise DataError(f"{what} has a missing or blank id at position {pos}; give every {noun} a non-empty id")
        ids.append(str(value))
    out = np.array(ids, dtype=str)
    dup = pd.Index(out).duplicated()
    if dup.any():
        pos = int(np.flatnonzero(dup)[0])
        raise DataError(f"duplicate {noun} id {str(out[pos])!r} (repeated at position {pos}); make {noun} ids unique")
    return out


def _as_labels(values: Any, ids: np.ndarray, what: str, noun: str) -> np.ndarray:
    """Per-item or per-model labels (scalar broadcast), checked for length and blanks."""
    n = len(ids)
    if isinstance(values, (str, bytes)):
        values = [values] * n
    arr = np.asarray(values, dtype=object)
    if arr.ndim != 1 or len(arr) != n:
        got = len(arr) if arr.ndim == 1 else f"shape {arr.shape}"
        raise DataError(f"{what} has {got} entries but the matrix has {n} {noun}s; pass one {what} per {noun}")
    out = []
    for pos, value in enumerate(arr):
        if isinstance(value, bytes):
            value = value.decode("utf-8", errors="replace")
        if value is None or (not isinstance(value, str) and pd.isna(value)) or not str(value).strip():
            raise DataError(
                f"{what} is missing or blank for {noun} {str(ids[pos])!r}; fill it in or leave {what} unset"
            )
        out.append(str(value))
    return np.array(out, dtype=str)


def testlet_labels(values: Any, ids: np.ndarray) -> np.ndarray:
    """Per-item testlet labels; a missing or blank one makes its item a testlet of its own."""
    arr = np.asarray(values, dtype=object)
    if isinstance(values, (str, bytes)) or arr.ndim != 1 or len(arr) != len(ids):
        raise DataError(f"testlet needs one label per item ({len(ids)}); got "
                        f"{'one string' if isinstance(values, (str, bytes)) else arr.shape}: pass a label per item, "
                        "blank for an item that stands alone")
    blank = np.array([v is None or (not isinstance(v, str) and pd.isna(v)) or not str(v).strip() for v in arr],
                     dtype=bool)
    return np.where(blank, np.char.add("item:", ids.astype(str)), arr.astype(str))


def check_threshold(binarize: Any) -> float | None:
    """A ``binarize`` threshold as a float (None stays None); anything but a finite number is refused."""
    if binarize is None:
        return None
    if isinstance(binarize, bool) or not isinstance(binarize, (int, float, np.integer, np.floating)):
        raise DataError(f"binarize must be a number (the threshold T of score >= T), got {binarize!r}")
    if not np.isfinite(float(binarize)):
        raise DataError(f"binarize must be a finite number, got {binarize!r}; pass e.g. --binarize 0.5")
    return float(binarize)


def _cell_values(arr: np.ndarray, items: np.ndarray, models: np.ndarray, threshold: float | None = None) -> np.ndarray:
    """Raw cells -> int8 with ``MISSING``; raises on anything but 0, 1 or missing (with a ``threshold``
    T, any number: score >= T -> 1, else 0)."""

    def where(i: int, m: int) -> str:
        return f"at item {str(items[i])!r}, model {str(models[m])!r}"

    fix = "recode to 0/1 and leave missing cells empty"
    if arr.dtype.kind == "b":
        return arr.astype(np.int8)
    if arr.dtype.kind in "iu":
        missing = arr == MISSING if arr.dtype == np.int8 else np.zeros(arr.shape, dtype=bool)
        values = arr.astype(np.float64)
    elif arr.dtype.kind == "f":
        missing = np.isnan(arr)
        values = arr.astype(np.float64)
    else:
        obj = arr.astype(object)
        missing = np.asarray(pd.isna(obj), dtype=bool)
        values = np.full(arr.shape, np.nan)
        try:
            values[~missing] = obj[~missing].astype(np.float64)
        except (TypeError, ValueError):
            for i, m in zip(*np.nonzero(~missing), strict=True):
                try:
                    float(obj[i, m])
                except (TypeError, ValueError):
                    raise DataError(
                        f"responses contain a non-numeric value (found {_fmt(obj[i, m])} {where(i, m)}); "
                        f"{_KEY_FIRST if _is_answer(obj[i, m]) else ''}{fix}"
                    ) from None
            raise  # pragma: no cover - every element converted one by one
    if threshold is not None:
        if not np.isfinite(values[~missing]).all():
            i, m = (int(k[0]) for k in np.nonzero(~missing & ~np.isfinite(values)))
            raise DataError(f"responses contain a value that is not a finite number (found {_fmt(arr[i, m])} "
                            f"{where(i, m)}); {fix}")
        return np.where(missing, MISSING, values >= threshold).astype(np.int8)
    bad = ~missing & (values != 0) & (values != 1)
    if bad.any():
        i, m = (int(k[0]) for k in np.nonzero(bad))
        raw = arr[i, m]
        hint = " (-1 means missing only in int8 arrays)" if raw == -1 else ""
        codes = bool(np.all(values[bad] == np.round(values[bad])) and np.all(values[bad] >= 0))
        raise DataError(
            f"responses contain values other than 0, 1 or missing (found {_fmt(raw)} {where(i, m)}){hint}; "
            + (f"{_KEY_FIRST}{fix}" if codes else
               f"{fix}, or pass --binarize T (binarize=T) to count a score >= T as correct (partial credit)")
        )
    return np.where(missing, MISSING, values).astype(np.int8)


def _check_observed(y: np.ndarray, ids: np.ndarray, axis: int, noun: str) -> None:
    """Every item (axis=1 reduction) / model (axis=0) needs at least one observed cell."""
    empty = np.flatnonzero(~(y != MISSING).any(axis=axis))
    if empty.size:
        others = f" (and {empty.size - 1} other {noun}s)" if empty.size > 1 else ""
        raise DataError(
            f"{noun} {str(ids[empty[0]])!r}{others} has no observed responses; "
            "drop it from the data, or let it be dropped (drop_empty=True, the default of every reader; on the command "
            "line, leave out --refuse-empty)"
        )


def make_responses(
    matrix: Any,
    *,
    item_id: Sequence[Any] | None = None,
    model_id: Sequence[Any] | None = None,
    item_group: Sequence[Any] | str | None = None,
    family: Sequence[Any] | str | None = None,
    owner: Sequence[Any] | str | None = None,
    testlet: Sequence[Any] | None = None,
    name: str | None = None,
    source: str | None = None,
    drop_empty: bool = False,
    binarize: float | None = None,
) -> xr.Dataset:
    """Build and validate a response Dataset from an items x models matrix.

    Parameters
    ----------
    matrix : array-like, shape (items, models)
        Cells 0, 1 or missing. Missing is NaN, ``None`` or ``pandas.NA``; the code ``-1`` is
        read as missing only when the array is already ``int8`` (the stored layout). A
        ``pandas.DataFrame`` supplies its index and columns as default item and model ids.
    item_id, model_id : sequence, optional
        Ids, converted to ``str``. Default ``"0" .. "n-1"``. Must be unique and non-blank.
    item_group : sequence or str, optional
        One label per item (a string applies to all). Default ``"all"``.
    family, owner : sequence or str, optional
        One label per model. Default: derived from the model ids by
        :func:`~bayesirt.data.families.derive_family` / ``derive_owner``.
    testlet : sequence, optional
        One label per item: items of one testlet share a stem, passage or scenario, so they are
        not independent draws of the item population (the near-tie audit's paired model takes them
        as clusters). A missing or blank label makes the item a testlet of its own (label
        ``"item:<item_id>"``). Default: no ``testlet`` coordinate (every item independent).
    name, source : str, optional
        Stored as Dataset attrs (``source`` = where the data was read from).
    drop_empty : bool
        Drop items and models without any observed response instead of raising: their numbers are
        stored in the attrs ``n_dropped_items`` / ``n_dropped_models`` and their ids, as JSON lists,
        in ``dropped_items`` / ``dropped_models``. Default False.
    binarize : float, optional
        Threshold T for scores other than 0/1 (partial credit): score >= T -> 1, else 0; stored as
        ``attrs["binarize"]``. Without it such values are refused.

    Returns
    -------
    xarray.Dataset
        ``responses`` (item, model) int8 with ``MISSING`` = -1, and the coordinates described
        in the module docstring.

    Raises
    ------
    DataError
        Empty or non-2-D matrix, a single item or model, values other than 0/1/missing,
        duplicate or blank ids, metadata of the wrong length, or an item or model with no
        observed response.
    """
    if isinstance(matrix, pd.DataFrame):
        item_id = matrix.index.to_numpy() if item_id is None else item_id
        model_id = matrix.columns.to_numpy() if model_id is None else model_id
    arr = _as_matrix(matrix)
    n_items, n_models = arr.shape
    items = _as_ids(item_id, n_items, "item_id", "item")
    models = _as_ids(model_id, n_models, "model_id", "model")
    groups = _as_labels(_DEFAULT_GROUP if item_group is None else item_group, items, "item_group", "item")
    fams = _as_labels(derive_family(models) if family is None else family, models, "family", "model")
    owners = _as_labels(derive_owner(models) if owner is None else owner, models, "owner", "model")
    testlets = None if testlet is None else testlet_labels(testlet, items)
    threshold = check_threshold(binarize)
    y = _cell_values(arr, items, models, threshold)
    attrs: dict[str, Any] = {k: str(v) for k, v in (("name", name), ("source", source)) if v is not None}
    if threshold is not None:
        attrs["binarize"] = threshold
    if drop_empty:
        obs = y != MISSING
        keep_i, keep_m = obs.any(axis=1), obs.any(axis=0)
        if not (keep_i.all() and keep_m.all()):
            attrs.update(n_dropped_items=int((~keep_i).sum()), n_dropped_models=int((~keep_m).sum()),
                         dropped_items=json.dumps(items[~keep_i].tolist()),
                         dropped_models=json.dumps(models[~keep_m].tolist()))
            y, items, groups = y[keep_i][:, keep_m], items[keep_i], groups[keep_i]
            testlets = None if testlets is None else testlets[keep_i]
            models, fams, owners = models[keep_m], fams[keep_m], owners[keep_m]
            if len(items) < 2 or len(models) < 2:
                raise DataError(
                    f"only {len(items)} item(s) x {len(models)} model(s) have observed responses; "
                    "IRT needs at least 2 of each"
                )
    _check_observed(y, models, 0, "model")
    _check_observed(y, items, 1, "item")
    out = xr.Dataset(
        {
            "responses": (
                ("item", "model"),
                y,
                {"missing_code": MISSING, "description": "1 = correct, 0 = incorrect, -1 = missing"},
            )
        },
        coords={
            "item": items,
            "model": models,
            "item_id": ("item", items.copy()),
            "model_id": ("model", models.copy()),
            "item_group": ("item", groups),
            "family": ("model", fams),
            "owner": ("model", owners),
        },
        attrs=attrs,
    )
    return out if testlets is None else out.assign_coords(testlet=("item", testlets))


def validate_responses(ds: xr.Dataset) -> xr.Dataset:
    """Re-validate a Dataset that claims to be a response Dataset (e.g. one read from NetCDF).

    Parameters
    ----------
    ds : xarray.Dataset
        Needs a ``responses`` variable with dims ``item`` and ``model`` (either order).
        ``item_group``, ``family``, ``owner`` coordinates are kept when present.

    Returns
    -------
    xarray.Dataset
        A fresh Dataset built by :func:`make_responses` (same ids, metadata, name, source).
    """
    if not isinstance(ds, xr.Dataset) or "responses" not in ds.data_vars:
        raise DataError("not a response Dataset: no 'responses' variable; build one with bayesirt.data.make_responses")
    da = ds["responses"]
    if set(da.dims) != {"item", "model"}:
        raise DataError(
            f"'responses' has dims {da.dims}, expected ('item', 'model'); rebuild it with bayesirt.data.make_responses"
        )
    da = da.transpose("item", "model")

    def coord(key: str) -> Any:
        return da[key].values if key in da.coords else None

    return make_responses(
        da.values,
        item_id=coord("item"),
        model_id=coord("model"),
        item_group=coord("item_group"),
        family=coord("family"),
        owner=coord("owner"),
        testlet=coord("testlet"),
        name=ds.attrs.get("name"),
        source=ds.attrs.get("source"),
    ).assign_attrs({k: v for k, v in ds.attrs.items() if k not in ("name", "source")})


#: Metadata coordinates of a response Dataset that a fit stores in its ``constant_data`` group.
METADATA = ("item_group", "family", "owner")
#: Metadata coordinates that only some response Datasets have (also stored in ``constant_data``).
OPTIONAL_METADATA = ("testlet",)


def to_observed_data(ds: xr.Dataset) -> tuple[xr.Dataset, xr.Dataset]:
    """The ArviZ ``observed_data`` and ``constant_data`` groups of a response Dataset.

    ``observed_data["responses"]`` (item, model) holds 1.0 / 0.0 and NaN where no response was
    observed (ArviZ's convention for missing data; float32, which holds 0, 1 and NaN exactly), with
    the index coordinates only; the metadata (:data:`METADATA`) go to ``constant_data``, so every
    group's coordinates are the same and ``az.summary`` can stack any of them.
    """
    y = ds["responses"]
    values = y.values.astype(np.float32)  # 4 bytes a cell: no float64 copy of a leaderboard-size matrix
    values[y.values == MISSING] = np.nan
    observed = y.copy(data=values).reset_coords(drop=True)
    observed.attrs = {}
    constant = xr.Dataset({n: ds[n].reset_coords(drop=True) for n in (*METADATA, *OPTIONAL_METADATA) if n in ds.coords})
    return observed.to_dataset(name="responses").assign_attrs(ds.attrs), constant


def from_observed_data(tree: xr.DataTree) -> xr.Dataset:
    """The response Dataset (int8, ``MISSING`` = -1, metadata coordinates) of a fit's
    ``observed_data`` and ``constant_data`` groups: the inverse of :func:`to_observed_data`."""
    if "observed_data" not in tree.children:
        raise DataError("the fit has no observed_data group; pass the responses explicitly")
    observed = tree["observed_data"].to_dataset()
    y = observed["responses"]  # NaN = missing (files of earlier versions: int8 with -1, also read)
    constant = tree["constant_data"].to_dataset() if "constant_data" in tree.children else xr.Dataset()
    meta = {n: constant[n].values for n in (*METADATA, *OPTIONAL_METADATA) if n in constant}
    out = make_responses(y.values, item_id=y["item"].values, model_id=y["model"].values, **meta,
                         name=observed.attrs.get("name"), source=observed.attrs.get("source"))
    return out.assign_attrs({k: v for k, v in observed.attrs.items() if k not in out.attrs})


def observed_mask(ds: xr.Dataset | xr.DataArray) -> np.ndarray:
    """Boolean (items, models) array, True where a response was observed.

    Parameters
    ----------
    ds : xarray.Dataset or xarray.DataArray
        A response Dataset or its ``responses`` variable.
    """
    da = ds["responses"] if isinstance(ds, xr.Dataset) else ds
    return np.asarray(da.values != MISSING)


def observed_cells(y: np.ndarray, *, chunk_items: int = 1024) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The observed cells of an int8 (item, model) response matrix in long format.

    Returns ``(item, model, response)``: int32 row and column indices in row-major order and the
    int8 responses there. Built a block of rows at a time, so no full-size index or float array
    exists beside the matrix (a 5,000 x 14,042 matrix needs 9 bytes per observed cell).
    """
    items, models, values = [], [], []
    for start in range(0, y.shape[0], chunk_items):
        block = y[start:start + chunk_items]
        i, m = np.nonzero(block != MISSING)
        items.append((i + start).astype(np.int32))
        models.append(m.astype(np.int32))
        values.append(block[i, m].astype(np.int8))
    return np.concatenate(items), np.concatenate(models), np.concatenate(values)


def summarize(ds: xr.Dataset) -> dict[str, Any]:
    """Headline numbers of a response Dataset, for messages and reports.

    Returns
    -------
    dict
        ``name`` (or None), ``n_items``, ``n_models``, ``n_observed``, ``missing_fraction``
        (share of cells missing) and ``mean_accuracy`` (mean over observed cells), as plain
        Python ints and floats.
    """
    y = ds["responses"].values
    obs = y != MISSING
    n_observed = int(obs.sum())
    return {
        "name": ds.attrs.get("name"),
        "n_items": int(ds.sizes["item"]),
        "n_models": int(ds.sizes["model"]),
        "n_observed": n_observed,
        "missing_fraction": float(1.0 - n_observed / y.size),
        "mean_accuracy": float(y[obs].mean()) if n_observed else float("nan"),
    }


def informative_items(responses: xr.Dataset) -> tuple[xr.Dataset, list[str]]:
    """Drop items every observed model answers alike (zero variance, or never answered: no
    information on ability, and in a short-test study they flatter random baselines); return the
    rest and the dropped item ids."""
    codes = responses["responses"].values
    observed = codes >= 0
    correct = np.where(observed, codes, 0).sum(axis=1)
    constant = (correct == 0) | (correct == observed.sum(axis=1))
    dropped = [str(i) for i in responses["item"].values[constant]]
    return responses.isel(item=np.flatnonzero(~constant)), dropped


def drop_constant_items(responses: xr.Dataset, *, shown: int = 10) -> tuple[xr.Dataset, list[str]]:
    """:func:`informative_items` for a job: the informative items and a note naming the dropped ones
    (``[]`` when none was dropped), for the job's warnings (report and ``summary.json``)."""
    kept, dropped = informative_items(responses)
    if not dropped:
        return kept, []
    if kept.sizes["item"] == 0:
        raise DataError(f"every item ({len(dropped)}) was answered alike by every model (zero variance); "
                        "there is nothing to fit")
    names = ", ".join(dropped[:shown]) + (f" ... ({len(dropped) - shown} more)" if len(dropped) > shown else "")
    return kept, [f"{len(dropped)} zero-variance item(s) dropped before fitting (every model answered them alike: "
                  f"no information on ability): {names}"]
