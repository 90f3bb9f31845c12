"""Where a direct model's C callbacks run from (:func:`bayesirt.inference.nutpie_callback.compile_callbacks`).

numba's engine resolves the calls of a callback to the standalone builds of the numba functions it calls
when this process built them (slower code: the module's docstring), so a callback compiled here, or
loaded from the cache after those functions were built here, runs from an engine of its own; one loaded
into a process that built none of them runs from numba's. Each case runs in a new process with its own
numba cache, and the log density and gradient are the same numbers in all of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_WORKER = """
import json, sys
import numpy as np
from bayesirt.data import simulate_pl
from bayesirt.inference.nutpie_direct import direct_model
from bayesirt.models.specs import load_spec

out = {}
for name in sys.argv[1:]:
    missing = {"dense": 0.0, "cells": 0.95}[name]  # by item rows, or the observed cells (layouts)
    responses, _ = simulate_pl("2pl", n_items=30, n_models=20, seed=3, missing=missing)
    model = direct_model(responses, load_spec("2pl"))
    callback = model.compiled.compiled_logp_func
    value, gradient = model.logp(np.linspace(-1.0, 1.0, model.compiled.n_dim))
    out[name] = {"from_cache": callback.from_cache, "own_engine": callback.engine is not None,
                 "value": value, "gradient": gradient.tolist()}
print(json.dumps(out))
"""


def _run(cache, *layouts) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", _WORKER, *layouts], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
def test_callbacks_run_from_their_own_engine_unless_loaded_into_a_clean_process(tmp_path):
    compiled = _run(tmp_path, "dense")["dense"]
    assert not compiled["from_cache"] and compiled["own_engine"]
    loaded = _run(tmp_path, "dense")
    assert loaded["dense"]["from_cache"] and not loaded["dense"]["own_engine"]
    # the cells' callback builds functions the dense one also calls, under this process's symbols; the dense
    # callback's copies carry those of the process that compiled it, so nothing here shadows them
    after_build = _run(tmp_path, "cells", "dense")
    assert not after_build["cells"]["from_cache"] and after_build["cells"]["own_engine"]
    assert after_build["dense"]["from_cache"] and not after_build["dense"]["own_engine"]
    # both compiled by one process, so the copies in both carry the same symbols: the cells' callback, loaded
    # first into numba's engine, defines them, and the dense one then runs from an engine of its own
    shared = tmp_path / "shared"
    both = _run(shared, "dense", "cells")
    assert not both["dense"]["from_cache"] and not both["cells"]["from_cache"]
    shadowed = _run(shared, "cells", "dense")
    assert shadowed["cells"]["from_cache"] and not shadowed["cells"]["own_engine"]
    assert shadowed["dense"]["from_cache"] and shadowed["dense"]["own_engine"]
    for case in (loaded, after_build, both, shadowed):
        assert case["dense"]["value"] == compiled["value"]
        assert case["dense"]["gradient"] == compiled["gradient"]
