"""environment.versions(): MindSpeed and MindSpeed-LLM run from source trees (no package
metadata) still get a version in the manifest, read from the tree's setup.py/pyproject.toml as
text (never executed) or the package's __version__, and say where it came from."""

import importlib
import sys

import pytest

from mindspeed_prof.recording.environment import versions

# What MindSpeed's and MindSpeed-LLM's setup.py look like (master): the version is a module
# constant; running the file would build the package (here: leave a marker).
SETUP_PY = """\
import setuptools
open(__file__ + ".EXECUTED", "w").close()
__description__ = 'MindSpeed for LLMs of Ascend'
__version__ = '{version}'
setuptools.setup(name='{name}', version=__version__)
"""


@pytest.fixture(autouse=True)
def no_mindspeed_imported(monkeypatch):
    for name in [n for n in sys.modules if n.split(".")[0] in ("mindspeed", "mindspeed_llm")]:
        monkeypatch.delitem(sys.modules, name)
    yield
    importlib.invalidate_caches()


def source_tree(tmp_path, package, setup_py=None, pyproject=None, init=""):
    tree = tmp_path / f"{package}_checkout"
    (tree / package).mkdir(parents=True)
    (tree / package / "__init__.py").write_text(init)
    if setup_py is not None:
        (tree / "setup.py").write_text(setup_py)
    if pyproject is not None:
        (tree / "pyproject.toml").write_text(pyproject)
    return tree


def on_path(monkeypatch, *folders):
    for folder in folders:
        monkeypatch.syspath_prepend(str(folder))
    importlib.invalidate_caches()


def test_a_source_tree_version_is_read_from_its_setup_py_without_running_it(tmp_path,
                                                                             monkeypatch):
    mindspeed = source_tree(tmp_path, "mindspeed", SETUP_PY.format(version="0.12.1",
                                                                   name="mindspeed"))
    llm = source_tree(tmp_path, "mindspeed_llm", SETUP_PY.format(version="26.0.0dev0",
                                                                 name="mindspeed_llm"))
    on_path(monkeypatch, mindspeed, llm)
    import mindspeed_llm  # noqa: F401 - imported or not, the tree is found the same way

    found = versions()
    assert found["mindspeed"] == f"0.12.1 (source tree {mindspeed})"
    assert found["mindspeed_llm"] == f"26.0.0dev0 (source tree {llm})"
    assert not list(tmp_path.rglob("*.EXECUTED"))


def test_a_pyproject_version_is_read_where_setup_py_has_none(tmp_path, monkeypatch):
    pytest.importorskip("tomllib")
    tree = source_tree(tmp_path, "mindspeed", setup_py="import setuptools\nsetuptools.setup()\n",
                       pyproject='[project]\nname = "mindspeed"\nversion = "2.3.0"\n')
    on_path(monkeypatch, tree)
    assert versions()["mindspeed"] == f"2.3.0 (source tree {tree})"


def test_the_package_own_version_attribute_is_used_when_it_has_one(tmp_path, monkeypatch):
    tree = source_tree(tmp_path, "mindspeed_llm", init="__version__ = '3.1.4'\n")
    on_path(monkeypatch, tree)
    import mindspeed_llm  # noqa: F401

    assert versions()["mindspeed_llm"] == "3.1.4 (mindspeed_llm.__version__)"


def installed(site, name, version):
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text("")
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_an_installed_package_keeps_its_metadata_version(tmp_path, monkeypatch):
    installed(tmp_path / "site", "mindspeed", "2.1.0")
    on_path(monkeypatch, tmp_path / "site")
    assert versions()["mindspeed"] == "2.1.0"


def test_a_source_tree_ahead_of_an_older_install_gives_the_tree_version(tmp_path, monkeypatch):
    installed(tmp_path / "site", "mindspeed", "2.1.0")
    tree = source_tree(tmp_path, "mindspeed", SETUP_PY.format(version="0.12.1",
                                                              name="mindspeed"))
    on_path(monkeypatch, tmp_path / "site", tree)  # the tree first: it is what imports
    assert versions()["mindspeed"] == f"0.12.1 (source tree {tree})"


def test_nothing_found_is_recorded_as_null(tmp_path, monkeypatch):
    on_path(monkeypatch, source_tree(tmp_path, "mindspeed"))  # no setup.py, no metadata
    found = versions()
    assert found["mindspeed"] is None and found["mindspeed_llm"] is None
