"""The test selections the docs name stay true: every test marked `slow` by name still exists,
so the loop to run between edits (`-m "not e2e and not slow"`) does not silently grow back; the
timed e2e files, which run one after the other on one worker, exist; the Python 3.12 leg's files
and the tests it leaves out exist."""

import os
import re

import pytest

from conftest import (CURRENT_LEG_FILES, CURRENT_LEG_LEFT_OUT, REPO, SLOW_UNIT_TESTS, TESTS,
                      TIMED_E2E_FILES, TIMED_GROUP, worker_scope)


def _source(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def test_every_file_test_and_fixture_the_slow_list_names_exists():
    gone = []
    for entry in SLOW_UNIT_TESTS:
        path, _, rest = entry.replace("@", "::").partition("::")
        if not os.path.exists(os.path.join(TESTS, path)):
            gone.append(entry)
            continue
        if rest and not re.search(rf"^def {re.escape(rest)}\(", _source(os.path.join(TESTS, path)),
                                  flags=re.M):
            gone.append(entry)
    assert gone == []


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
