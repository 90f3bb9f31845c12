"""Sphinx configuration of the bayesirt documentation (make docs: warnings are errors)."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).parent / "_ext")]
# the notebooks' kernels import this tree's bayesirt too (not another checkout installed in the environment)
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
# the kernels draw with the inline backend (a backend set for the build, e.g. Agg, would hide the figures)
os.environ.pop("MPLBACKEND", None)

import bayesirt  # noqa: E402

project = "bayesirt"
copyright = "the bayesirt authors, MIT licence"
release = version = bayesirt.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
    "cli_reference",
    "api_reference",
    "benchmark_pages",
]
exclude_patterns = ["_build", "jupyter_execute", "**.ipynb_checkpoints"]
html_theme = "pydata_sphinx_theme"
html_title = "bayesirt"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}

autodoc_typehints = "none"
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()

myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3
nb_execution_mode = "force"
nb_execution_timeout = 120
nb_execution_raise_on_error = True
nb_execution_show_tb = True
suppress_warnings = ["myst.header"]
