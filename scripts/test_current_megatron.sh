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
#   bash scripts/test_current_megatron.sh            # the leg: its venv, its install, its tests
#   bash scripts/test_current_megatron.sh --install  # only the venv and its install
#   bash scripts/test_current_megatron.sh --tests    # only the tests, in the venv --install made
#   PYTHON312=/path/to/python3.12 bash scripts/...   # another interpreter
#
# .ci/run runs --install beside the README's command (both installs are pip unpacking wheels,
# one core each) and --tests after it.
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

part="${1:-all}"
case "$part" in
    all|--install|--tests) ;;
    *) echo "test_current_megatron.sh: unknown argument '$part'; use --install, --tests or" \
            "nothing (both)" >&2; exit 2 ;;
esac

run_tests() {
    # Every test marked current_megatron, wherever it lives (other areas mark theirs too), plus
    # the integration files that decide whether the headline command works on today's Megatron:
    # one pytest run, on pytest.ini's two workers (tests/conftest.py: the current_leg marker).
    python -m pytest -m current_leg tests
}

if [ "$part" = --tests ]; then
    if [ ! -x .venv312/bin/python ]; then
        echo "test_current_megatron.sh --tests: no .venv312 here; run" \
             "'bash scripts/test_current_megatron.sh --install' first" >&2
        exit 2
    fi
    . .venv312/bin/activate
    started=$(date +%s)
    run_tests
    echo "== Python 3.12 leg's tests done in $(( $(date +%s) - started )) s"
    exit 0
fi

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
# pip builds a local project inside its tree (build/, *.egg-info); .ci/run runs this install
# beside the 3.11 leg's, which builds there too, so this one builds from a copy of the working
# tree's files (tracked and untracked, git's ignores left out).
# (Outside a git checkout, which .ci/run never is, it builds here.)
source_tree=.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    source_tree=$(mktemp -d)
    trap 'rm -rf "$source_tree"' EXIT
    git ls-files -z -co --exclude-standard | tar --null --ignore-failed-read -T - -cf - \
        | tar -xf - -C "$source_tree"
fi
pip install "$source_tree[test-current]"
echo "== installed in $(( $(date +%s) - started )) s"
[ "$part" = --install ] && exit 0
run_tests
echo "== Python 3.12 leg done in $(( $(date +%s) - started )) s"
