"""The bare NPY matrix (:mod:`bayesirt.data.arrays`), and the reading options of every NumPy matrix format."""

from bayesirt.data.registry import BINARIZE, KEY, ORIENTATION, Reader, has_suffix

__all__ = ["READERS", "MATRIX_KEYS", "MATRIX_OPTIONS"]

MATRIX_KEYS = ("responses", "item_id", "model_id", "item_group", "testlet", "family", "owner")
"""The arrays of an NPZ archive: ``responses`` (required) and the optional ids and labels."""

MATRIX_OPTIONS = (ORIENTATION, KEY, BINARIZE)
"""The reading options of every NumPy matrix format (bare .npy, NPZ archive, NT folder)."""

READERS = (Reader("NPY matrix", ".npy (a matrix)", "bayesirt.data.arrays", "read_npy", has_suffix(".npy"),
                  MATRIX_OPTIONS, family="matrix files"),)
