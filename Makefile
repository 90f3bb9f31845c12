# The two set-up commands of the README. Each creates or reuses .venv (scripts/bootstrap.sh).
PY := .venv/bin/python

.PHONY: run test validate bench bench-mml bench-audit bootstrap

bootstrap:
	@scripts/bootstrap.sh

# Main job: 2PL on the embedded ChemBench data (analyses/demo.toml) -> outputs/demo/
# --force because rerunning the demo is the point of this target; the CLI never overwrites without it.
run: bootstrap
	$(PY) -m bayesirt run analyses/demo.toml --force

# Two worker processes, each test file on one of them (module fixtures are computed once): about 10 min on
# 2 cores instead of about 16 serially. Each worker holds up to ~2 GB.
test: bootstrap
	$(PY) -m pytest -q -n 2 --dist loadfile tests

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

# MML side by side with the PyPI package mirt (optional extra "bench", installed like bootstrap installs ".[test]").
bench-mml: bootstrap
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -e ".[bench]"
	$(PY) benchmarks/mml_mirt.py
