"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import platform
from importlib.metadata import version


def versions(packages) -> dict:
    """Python and package versions for the results header ("not installed" when absent)."""
    out = {"python": platform.python_version()}
    for pkg in packages:
        try:
            out[pkg] = version(pkg)
        except Exception:  # noqa: BLE001
            out[pkg] = "not installed"
    return out
