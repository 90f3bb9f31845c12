# The two set-up commands of the README. Each creates or reuses .venv (scripts/bootstrap.sh).
PY := .venv/bin/python

.PHONY: run test validate bench bench-mml bench-audit bootstrap

bootstrap:
	@scripts/bootstrap.sh

# Main job: 2PL on the embedded ChemBench data (analyses/demo.toml) -> outputs/demo/
# --force because rerunning the demo is the point of this target; the CLI never overwrites without it.
run: bootstrap
	$(PY) -m bayesirt run analyses/demo.toml --force

test: bootstrap
	$(PY) -m pytest -q tests

# Checks against the real data in ../shared/data (skipped cleanly when that folder is absent).
validate: bootstrap
	$(PY) -m pytest -q benchmarks/validation

bench: bootstrap
	$(PY) benchmarks/nuts_2pl.py

# The NT audit at default settings on simulated 5,000 x 1,267 and 5,000 x 14,042 matrices, and planted-DIF recovery.
bench-audit: bootstrap
	$(PY) benchmarks/nt_audit.py
	$(PY) benchmarks/nt_dif_recovery.py

# MML side by side with the PyPI package mirt (optional extra "bench", installed like bootstrap installs ".[test]").
bench-mml: bootstrap
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -e ".[bench]"
	$(PY) benchmarks/mml_mirt.py
