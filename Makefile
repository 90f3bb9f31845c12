# The two set-up commands of the README. Each creates or reuses .venv (scripts/bootstrap.sh).
PY := .venv/bin/python

.PHONY: run test test-fast test-jax docs validate bench bench-mml bench-stan bench-audit bootstrap

bootstrap:
	@scripts/bootstrap.sh

# Main job: 2PL on the embedded ChemBench data (analyses/demo.toml) -> outputs/demo/
# --force because rerunning the demo is the point of this target; the CLI never overwrites without it.
run: bootstrap
	$(PY) -m bayesirt run analyses/demo.toml --force

# Each of the two test workers computes on one thread: BLAS and numba's parallel kernels (dif_kernel,
# laplace_kernel) would otherwise start a thread per core in each worker, and the four threads on two cores spin
# against each other (make test-fast at 7374bdf: 162 CPU-s, 149 s wall without these; 103 CPU-s, 57 s with them).
TEST_ENV := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1

# Two worker processes, each test file on one of them (module fixtures are computed once). Measured at 6460bcc on
# 2 quiet cores (load 1, /usr/bin/time make test): 2,299 passed, 14 skipped in 10 min 48 s wall, 1,257 CPU-s
# (1,169 user + 88 sys); the largest process held 2.4 GB. At 581ef9a, just after an edit to models/kernels.py (its
# numba caches compiled again) and with --durations=40: 12 min 47 s. The slowest test is the documented Python block
# of docs/getting-started.md (82 s: NUTS fits of chembench and their comparison, whose marginal likelihood took 118 s
# until a89051e); then the safety-suite command (44 s) and K-fold by model (37 s).
# It includes tests/test_docs_commands.py, which runs each of the 41 distinct bayesirt commands of docs/ on stand-in
# files (the README's own are the first hour's test): at 6183857, 43 tests in 401 CPU-s (355.8 user + 45.2 sys, with
# -n 4 under nice at load 11-20: 18 min wall, which says nothing here), about 6-7 min of one worker on 2 quiet cores.
test: bootstrap
	$(TEST_ENV) $(PY) -m pytest -q -n 2 --dist loadfile tests

# The edit-test loop: everything not marked slow. Unmarked tests may not start a sampler,
# a subprocess, a process pool or Dask: tests/conftest.py fails them, naming the marker to add (tests/test_tiers.py).
# Tests, not files, are shared between the two workers (worksteal: no fixture here is costly enough to keep a file on
# one worker): 57 s for 1,724 tests on 2 quiet cores at 753a840, against 67 s with --dist loadfile.
# The controller starts the workers without importing PyMC, nutpie or distributed (tests/conftest.py imports them on
# the first test's setup) and pytest loads only the xdist and Hypothesis plugins (pyproject.toml): at ba72b5b, 1,779
# tests in 113 CPU-s (user+sys, /usr/bin/time) against 127 CPU-s without those two changes, run back to back on 2
# cores shared with other work (load 2-3; wall 72 s against 125 s). With PYTHONDONTWRITEBYTECODE set, pytest
# rewrites every test module's asserts on every run: it caches the rewritten modules only where bytecode is written.
# At 063acae it sat on the 60 s line (58.6-69.6 s); unmarked ADVI fits, which the guard missed (bayesirt's own ADVI
# loop, now guarded), and four Monte Carlo coverage studies were then marked slow and the 300-item SQUAREM check run
# on 150 models. Measured at 2bca42f on 2 quiet cores (load 0.1, /usr/bin/time make test-fast, numba cache warm):
# 1,811 passed in 43.4 s wall, 81 CPU-s (74.8 user + 6.2 sys).
# numba's on-disk cache is in bayesirt/**/__pycache__ (written there even with PYTHONDONTWRITEBYTECODE), shared by both
# workers and kept between runs: a fresh clone's first run compiles the kernels (137 CPU-s at 063acae, 120 warm).
test-fast: bootstrap
	$(TEST_ENV) $(PY) -m pytest -q -n 2 --dist worksteal -m "not slow" tests

# The JAX NUTS samplers (sampler="numpyro" | "blackjax": tests/test_jax_sampler.py, skipped by `make test`, whose
# .venv has no JAX) in their own environment .venv-jax with the "jax" extra, pinned by requirements.lock like the
# rest. Creating it takes about 4 min (PyPI downloads); the tests about 2 min on 2 cores. .ci/run runs it after `make test`.
JAXPY := .venv-jax/bin/python
test-jax: bootstrap
	@[ -x $(JAXPY) ] || $(PY) -m venv .venv-jax
	@want=$$(cat pyproject.toml requirements.lock | sha256sum | cut -d' ' -f1); \
	if [ "$$(cat .venv-jax/.installed 2>/dev/null)" != "$$want" ]; then \
		echo "test-jax: installing bayesirt[test,jax] into .venv-jax"; \
		$(JAXPY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -e ".[test,jax]" \
			&& echo "$$want" > .venv-jax/.installed; \
	fi
	$(JAXPY) -m pytest -q tests/test_jax_sampler.py

# The documentation site (docs/, Sphinx) in docs/_build/html, warnings as errors. Installs the "docs" extra into
# .venv (pinned by requirements.lock) when missing; the notebooks run and the CLI, API and benchmark pages are
# generated from the code and benchmarks/results at build time. About a minute on 2 cores.
docs: bootstrap
	@want=$$(cat pyproject.toml requirements.lock | sha256sum | cut -d' ' -f1); \
	if [ "$$(cat .venv/.installed-docs 2>/dev/null)" != "$$want" ]; then \
		echo "docs: installing bayesirt[docs] into .venv"; \
		$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -e ".[test,docs]" \
			&& echo "$$want" > .venv/.installed-docs; \
	fi
	$(PY) -m sphinx -W --keep-going -q -b html docs docs/_build/html

# Checks against the real data in ../shared/data (skipped cleanly when that folder is absent).
validate: bootstrap
	$(PY) -m pytest -q benchmarks/validation

# Every side-by-side comparison in one run (benchmarks/harness.py): pip-installs the pinned peers (mirt via the
# "bench" extra as bench-mml does, catsim==0.21.0, factor-analyzer via the "test" extra) unless already installed,
# runs each comparison script in its own subprocess and writes BENCHMARKS.md from their results JSONs. Hours on 2 cores (the NUTS comparison alone ~2 h); not part of `make test`.
# Subsets and re-rendering: benchmarks/harness.py --run mml,cat | --render-only | --quick (see benchmarks/README.md).
bench: bootstrap
	$(PY) benchmarks/harness.py

# The NT audit at default settings on simulated 5,000 x 1,267 and 5,000 x 14,042 matrices, and planted-DIF recovery.
bench-audit: bootstrap
	$(PY) benchmarks/nt_audit.py
	$(PY) benchmarks/nt_dif_recovery.py

# NUTS side by side with Stan (benchmarks/nuts_stan.py): PyStan 3.14 in its own venv benchmarks/.peer-venvs/stan, created on
# first use (never in .venv: Stan is no dependency of bayesirt); 300x1000 and 300x300, about an hour on 2 cores.
bench-stan: bootstrap
	$(PY) benchmarks/nuts_stan.py

# MML side by side with the PyPI package mirt (optional extra "bench", installed like bootstrap installs ".[test]").
bench-mml: bootstrap
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -e ".[bench]"
	$(PY) benchmarks/mml_mirt.py
