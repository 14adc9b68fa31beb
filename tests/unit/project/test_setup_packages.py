"""setup.py installs every package of mindspeed_prof/ (a subpackage left out of its list is
missing from a wheel, and imports fail only once installed)."""

import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_every_package_under_mindspeed_prof_is_listed_in_setup_py():
    with open(os.path.join(REPO, "setup.py")) as handle:
        setup = handle.read()
    root = os.path.join(REPO, "mindspeed_prof")
    packages = ["mindspeed_prof" + ("." + os.path.relpath(d, root).replace(os.sep, ".")
                                    if d != root else "")
                for d, _, files in os.walk(root) if "__init__.py" in files]
    assert "mindspeed_prof.output.read" in packages  # the walk finds subpackages
    assert [p for p in packages if f'"{p}"' not in setup] == []
