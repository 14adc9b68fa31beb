"""The test selections the docs name stay true: a unit test that runs torchrun or spawns ranks
is marked `slow` (or `e2e`), and the tests of a file's module-scoped job (a gloo group, jobs run
once per file) are all marked `slow` or none are, so the loop to run between edits
(`-m "not e2e and not slow"`) does not silently grow back; the timed e2e files, which run one
after the other on one worker, exist; the Python 3.12 leg's files and the tests it leaves out
exist."""

import ast
import glob
import os
import re

import pytest

from conftest import (CURRENT_LEG_FILES, CURRENT_LEG_LEFT_OUT, CURRENT_LEG_TESTS, REPO, TESTS,
                      TIMED_E2E_FILES, TIMED_GROUP, worker_scope)


def _source(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _marked_slow(node):
    return any("mark.slow" in ast.unparse(decorator) for decorator in node.decorator_list)


def _fixture_scope(node):
    """A fixture's scope ("function" when unset), or None when node is not a fixture."""
    for decorator in node.decorator_list:
        if ast.unparse(decorator).startswith("pytest.fixture"):
            for keyword in getattr(decorator, "keywords", ()):
                if keyword.arg == "scope":
                    return ast.literal_eval(keyword.value)
            return "function"
    return None


def shared_jobs_marked_unlike(source):
    """For each fixture of the file that outlives a test (scope module or wider: a job run once
    for the file), the tests that use it, directly or through the file's other fixtures, when
    some are marked slow and some are not: {fixture: (slow tests, the others)}."""
    tree = ast.parse(source)
    file_slow = any(isinstance(node, ast.Assign) and "pytestmark" in ast.unparse(node.targets[0])
                    and "mark.slow" in ast.unparse(node.value) for node in tree.body)
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    fixtures = {node.name: node for node in functions if _fixture_scope(node) is not None}

    def uses(node, seen=()):
        names = {arg.arg for arg in node.args.args}
        for name in names & set(fixtures) - set(seen):
            names |= uses(fixtures[name], (*seen, name))
        return names

    unlike = {}
    for name, fixture in fixtures.items():
        if _fixture_scope(fixture) == "function":
            continue
        users = [node for node in functions if node.name.startswith("test_") and name in uses(node)]
        slow = sorted(node.name for node in users if file_slow or _marked_slow(node))
        quick = sorted(node.name for node in users if node.name not in slow)
        if slow and quick:
            unlike[name] = (slow, quick)
    return unlike


def _starts_ranks(node):
    """Whether node's code launches ranks: torch.distributed.run (torchrun) in a command it runs,
    or torch.multiprocessing's spawn (a lone child process a test starts is no job: not here)."""
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        name = ast.unparse(call.func)
        if name == "spawn" or name.endswith(".spawn"):
            return True
        for arg in call.args:
            if isinstance(arg, (ast.List, ast.Tuple)) and any(
                    isinstance(item, ast.Constant) and item.value == "torch.distributed.run"
                    for item in arg.elts):
                return True
    return False


def rank_launchers_unmarked(source):
    """The tests of a file that launch ranks (themselves or through the file's fixtures they use)
    and are marked neither slow nor e2e (a torchrun job among the unit tests)."""
    tree = ast.parse(source)
    if any(isinstance(node, ast.Assign) and "pytestmark" in ast.unparse(node.targets[0])
           and re.search(r"mark\.(slow|e2e)\b", ast.unparse(node.value)) for node in tree.body):
        return []
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    fixtures = {node.name: node for node in functions if _fixture_scope(node) is not None}

    def launches(node, seen=()):
        return _starts_ranks(node) or any(
            launches(fixtures[arg.arg], (*seen, arg.arg)) for arg in node.args.args
            if arg.arg in fixtures and arg.arg not in seen)

    return sorted(node.name for node in functions
                  if node.name.startswith("test_") and launches(node) and not any(
                      re.search(r"mark\.(slow|e2e)\b", ast.unparse(decorator))
                      for decorator in node.decorator_list))


def test_every_unit_test_that_launches_ranks_is_marked_slow():
    found = {}
    for path in sorted(glob.glob(os.path.join(TESTS, "unit", "**", "test_*.py"), recursive=True)):
        unmarked = rank_launchers_unmarked(_source(path))
        if unmarked:
            found[os.path.relpath(path, TESTS)] = unmarked
    assert found == {}


def test_a_test_that_runs_torchrun_or_spawns_ranks_without_the_mark_is_found():
    source = """
import subprocess, sys
import pytest
import torch.multiprocessing as mp

@pytest.fixture(scope="module")
def ranks():
    mp.spawn(print, nprocs=2)

def test_job(tmp_path):
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "train.py"])

def test_uses_ranks(ranks):
    pass

def test_quick():
    assert ["torch.distributed.run"]
"""
    assert rank_launchers_unmarked(source) == ["test_job", "test_uses_ranks"]
    marked = source.replace("def test_job", "@pytest.mark.e2e\ndef test_job").replace(
        "def test_uses", "@pytest.mark.slow\ndef test_uses")
    assert rank_launchers_unmarked(marked) == []


def test_the_tests_of_a_files_shared_job_are_all_slow_or_none_are():
    found = {}
    for path in sorted(glob.glob(os.path.join(TESTS, "unit", "**", "test_*.py"), recursive=True)):
        unlike = shared_jobs_marked_unlike(_source(path))
        if unlike:
            found[os.path.relpath(path, TESTS)] = unlike
    assert found == {}


def test_a_test_added_to_a_slow_job_without_the_mark_is_found():
    source = """
import pytest

@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return 1

@pytest.fixture
def report(job):
    return job

@pytest.mark.slow
def test_one(job):
    pass

def test_two(report):
    pass

def test_three(tmp_path):
    pass
"""
    assert shared_jobs_marked_unlike(source) == {"job": (["test_one"], ["test_two"])}
    marked = source.replace("def test_two", "@pytest.mark.slow\ndef test_two")
    assert shared_jobs_marked_unlike(marked) == {}
    whole_file = source.replace("import pytest\n", "import pytest\npytestmark = pytest.mark.slow\n")
    assert shared_jobs_marked_unlike(whole_file) == {}


def test_every_timed_e2e_file_exists_and_holds_e2e_tests():
    for path in TIMED_E2E_FILES:
        assert re.search(r"pytest\.mark\.e2e\b", _source(os.path.join(REPO, path))), path


@pytest.mark.parametrize("nodeid, scope", [
    ("tests/e2e/test_no_hang.py::test_async[2]", TIMED_GROUP),
    ("tests/e2e/test_captures_torchrun.py::test_x", TIMED_GROUP),
    ("tests/e2e/test_harness.py::test_x", "tests/e2e/test_harness.py"),
    ("tests/unit/recording/test_two_runs.py::test_a_second_job", "tests/unit/recording/test_two_runs.py"),
    ("tests/unit/config/test_window_plan.py::test_schedule_records_exactly_the_window", "tests/unit/config/test_window_plan.py"),
])
def test_a_worker_takes_the_timed_group_whole_and_every_other_test_file_by_file(nodeid, scope):
    assert worker_scope(nodeid) == scope


def test_the_python_312_legs_files_and_the_tests_it_leaves_out_exist():
    sources = [_source(os.path.join(REPO, path)) for path in CURRENT_LEG_FILES]
    for name in CURRENT_LEG_LEFT_OUT:
        assert any(re.search(rf"^def {re.escape(name)}\(", source, flags=re.M)
                   for source in sources), name
    for test in CURRENT_LEG_TESTS:  # path::name[parameters]
        path, name = test.split("::")
        assert re.search(rf"^def {re.escape(name.split('[')[0])}\(",
                         _source(os.path.join(REPO, path)), flags=re.M), test


class _Item:
    def __init__(self, nodeid, marker=None):
        self.nodeid, self._marker = nodeid, marker

    def get_closest_marker(self, name):
        return name if name == self._marker else None


def test_workers_take_the_timed_group_first_then_e2e_and_slow_files_then_the_quick_ones():
    from conftest import longest_first

    items = [_Item("tests/unit/config/test_window_plan.py::a"),
             _Item("tests/unit/test_exits.py::quick"),
             _Item("tests/unit/test_exits.py::signals", marker="slow"),
             _Item("tests/e2e/test_harness.py::a"),
             _Item("tests/e2e/test_no_hang.py::a"),
             _Item("tests/unit/config/test_window_plan.py::b")]
    longest_first(items)
    assert [item.nodeid for item in items] == [
        "tests/e2e/test_no_hang.py::a",
        "tests/unit/test_exits.py::quick",  # a file keeps its order, with its slow test's rank
        "tests/unit/test_exits.py::signals",
        "tests/e2e/test_harness.py::a",
        "tests/unit/config/test_window_plan.py::a",
        "tests/unit/config/test_window_plan.py::b"]


def test_no_test_file_imports_another_test_file():
    # A bare `from test_x import ...` finds test_x only once pytest has put its folder on
    # sys.path, so the importing file fails when run alone: shared code lives in tests/helpers.
    tests = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))
    found = []
    for folder, _, names in os.walk(tests):
        for name in names:
            if name.endswith(".py"):
                text = open(os.path.join(folder, name)).read()
                if re.search(r"^\s*(from|import) test_\w+", text, re.M):
                    found.append(os.path.relpath(os.path.join(folder, name), tests))
    assert found == []
