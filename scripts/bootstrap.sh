#!/usr/bin/env bash
# Create or reuse .venv with a working Python >= 3.12 and install bayesirt into it.
# Every candidate interpreter is *run*, not just located: pyenv shims exist for versions
# that are not selected and refuse to run.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
STAMP="$VENV/.installed"
works() { "$1" -c 'import sys, venv, ensurepip; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }

venv_ok() { [ -x "$VENV/bin/python" ] && works "$VENV/bin/python"; }

if ! venv_ok; then
    candidates=()
    [ -n "${BAYESIRT_PYTHON:-}" ] && candidates+=("$BAYESIRT_PYTHON")
    candidates+=(python3.14 python3.13 python3.12 python3 python)
    for root in "${PYENV_ROOT:-$HOME/.pyenv}" /root/.pyenv; do
        for p in "$root"/versions/3.1[2-9]*/bin/python3; do [ -e "$p" ] && candidates+=("$p"); done
    done
    for p in /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9] /opt/python*/bin/python3; do
        [ -e "$p" ] && candidates+=("$p")
    done
    found=""
    for c in "${candidates[@]}"; do
        if works "$c"; then found="$c"; break; fi
    done
    if [ -z "$found" ]; then
        echo "bayesirt needs Python >= 3.12 (PyMC 6 and ArviZ 1.x require it) and none of these ran:" >&2
        printf '  %s\n' "${candidates[@]}" >&2
        echo "Install Python 3.12+ or point BAYESIRT_PYTHON at one, then rerun." >&2
        exit 1
    fi
    echo "bootstrap: creating $VENV with $found ($("$found" --version 2>&1))"
    rm -rf "$VENV"
    "$found" -m venv "$VENV"
fi

# Reinstall only when the dependency declaration or the lock changed.
want=$(cat pyproject.toml requirements.lock | sha256sum | cut -d' ' -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
    echo "bootstrap: installing bayesirt and its locked dependencies into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c requirements.lock -e ".[test]"
    echo "$want" > "$STAMP"
fi
