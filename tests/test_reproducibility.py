import pytest
"""Same seed, same draws, whatever the state of the compilation caches.

A NUTS fit compiled from scratch (empty numba and PyTensor caches, as on the first run after an
install) used to give other draws than the same fit run again with the caches filled, while the
warm runs agreed with each other bit for bit: with fast-math flags LLVM rounded the freshly compiled
logp (its IR inlined into nutpie's function) differently from the cached one (linked as object
code). Each fit here runs in its own interpreter with its own cache folders.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A small fit; prints a hash of its draws and sampler statistics.
_FIT = """
import hashlib, json
import numpy as np
import bayesirt
from bayesirt.data import simulate_pl

responses, _ = simulate_pl("2pl", n_items=60, n_models=40, seed=1)
tree = bayesirt.fit(responses, "2pl", method="nuts", draws=100, tune=100, chains=2, seed=3, progress=False)
h = hashlib.sha256()
for group, names in (("posterior", ("theta", "discrimination", "intercept")), ("sample_stats", ("step_size", "n_steps"))):
    for name in names:
        h.update(np.ascontiguousarray(tree[group][name].values).tobytes())
print(json.dumps({"draws": h.hexdigest()}))
"""


def _fit_in_fresh_interpreter(numba_cache: Path, pytensor_dir: Path) -> str:
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = str(numba_cache)
    flags = [f for f in env.get("PYTENSOR_FLAGS", "").split(",") if f and not f.startswith(("base_compiledir=",
                                                                                            "compiledir="))]
    env["PYTENSOR_FLAGS"] = ",".join([*flags, f"base_compiledir={pytensor_dir}"])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", _FIT], env=env, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])["draws"]


@pytest.mark.slow
def test_cold_and_warm_caches_give_the_same_draws(tmp_path):
    numba_cache, pytensor_dir = tmp_path / "numba", tmp_path / "pytensor"
    cold = _fit_in_fresh_interpreter(numba_cache, pytensor_dir)
    assert any(numba_cache.rglob("*.nbi")) or any(pytensor_dir.rglob("*.nbi")), "the first fit filled no cache"
    warm = _fit_in_fresh_interpreter(numba_cache, pytensor_dir)
    assert cold == warm
