#!/usr/bin/env bash
# The second CI leg: Python 3.12 + torch 2.13.0 + megatron-core 0.19.2 (today's releases, which
# need Python >= 3.12), in its own venv (.venv312), running the integration tests that matter on
# today's Megatron (routes, headline defaults, windows, signals, the pipeline schedules' marks),
# one job each of pipeline, whatif and the wait analysis, and every test marked
# `current_megatron` (they skip on the Python 3.11 / megatron-core 0.16.1 leg); the files and
# tests are tests/conftest.py's CURRENT_LEG_FILES and CURRENT_LEG_TESTS. tests/e2e/test_inference_server.py is not
# among them: its static-engine harness imports
# megatron.core.inference modules that megatron-core 0.19 removed; inference tests written for
# 0.19's engines carry the current_megatron marker instead.
#
#   bash scripts/test_current_megatron.sh            # what .ci/run runs after the README's command
#   PYTHON312=/path/to/python3.12 bash scripts/...   # another interpreter
#
# On Python 3.12 only the CUDA build of torch 2.13.0 installs from PyPI (about 4.8 GB with its
# nvidia-* wheels); it runs here on the CPU (no driver), as the tests' CPU shim expects.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

is_python312() {  # a pyenv shim may be on PATH without 3.12 selected: run it to know
    [ -n "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1
}

find_python312() {
    local candidate root="${PYENV_ROOT:-$HOME/.pyenv}"
    for candidate in "${PYTHON312:-}" "$(command -v python3.12 2>/dev/null || true)" \
            $(ls -d "$root"/versions/3.12*/bin/python3.12 2>/dev/null | sort -rV); do
        if is_python312 "$candidate"; then echo "$candidate"; return; fi
    done
    return 1
}

if ! PY312=$(find_python312); then
    echo "test_current_megatron.sh: no Python 3.12 found (python3.12 on PATH, \$PYTHON312, or" \
         "pyenv's versions/3.12*); install one to run the megatron-core 0.19.2 leg" >&2
    exit 2
fi
echo "== Python 3.12 leg: $PY312 ($("$PY312" --version))"
started=$(date +%s)
"$PY312" -m venv .venv312
. .venv312/bin/activate
pip install torch==2.13.0
pip install '.[test-current]'
echo "== installed in $(( $(date +%s) - started )) s"
# Every test marked current_megatron, wherever it lives (other areas mark theirs too), plus the
# integration files that decide whether the headline command works on today's Megatron: one
# pytest run, on pytest.ini's two workers (tests/conftest.py: the current_leg marker).
python -m pytest -m current_leg tests
echo "== Python 3.12 leg done in $(( $(date +%s) - started )) s"
