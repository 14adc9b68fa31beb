"""scripts/test_current_megatron.sh's two parts (.ci/run runs --install beside the 3.11 leg and
--tests after it): a wrong argument or a missing venv is a usage error naming the fix."""

import os
import shutil
import subprocess

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "scripts", "test_current_megatron.sh")


def run_copy(tmp_path, *args):
    # a copy: the script works in the folder above its own, which here has no .venv312
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts")
    return subprocess.run(["bash", str(tmp_path / "scripts" / "test_current_megatron.sh"), *args],
                          capture_output=True, text=True, timeout=60)


def test_an_unknown_argument_is_a_usage_error_naming_the_parts(tmp_path):
    done = run_copy(tmp_path, "--test")
    assert done.returncode == 2
    assert "unknown argument '--test'; use --install, --tests or nothing" in done.stderr


def test_tests_without_the_installed_venv_say_to_run_install_first(tmp_path):
    done = run_copy(tmp_path, "--tests")
    assert done.returncode == 2
    assert "no .venv312 here; run 'bash scripts/test_current_megatron.sh --install' first" \
        in done.stderr
