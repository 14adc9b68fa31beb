"""The product's types are checked as CI runs them: mypy over mindspeed_prof/, arguments/ and
patches/ at its default strictness (settings in pyproject.toml)."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # mypy over the package

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.mark.skipif(subprocess.run([sys.executable, "-c", "import mypy"]).returncode != 0,
                    reason="mypy is not installed (pip install '.[test]' brings it)")
def test_the_product_type_checks_clean():
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
