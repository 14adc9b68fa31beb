"""The test selection the docs name: every test marked `slow` by name still exists, so the loop
to run between edits (`-m "not e2e and not slow"`) does not silently grow back; with workers,
every torchrun job runs on one of them."""

import os
import re

import pytest

from conftest import E2E_FILES_ELSEWHERE, SLOW_UNIT_TESTS, TESTS, worker_scope


def test_every_file_test_and_fixture_the_slow_list_names_exists():
    gone = []
    for entry in SLOW_UNIT_TESTS:
        path, _, rest = entry.replace("@", "::").partition("::")
        if not os.path.exists(os.path.join(TESTS, path)):
            gone.append(entry)
            continue
        with open(os.path.join(TESTS, path), encoding="utf-8") as handle:
            source = handle.read()
        if rest and not re.search(rf"^def {re.escape(rest)}\(", source, flags=re.M):
            gone.append(entry)
    assert gone == []


def test_every_file_that_holds_e2e_tests_runs_in_the_workers_e2e_group():
    holders = set()
    for folder in ("unit", "e2e"):
        for name in os.listdir(os.path.join(TESTS, folder)):
            if name.startswith("test_") and name.endswith(".py"):
                with open(os.path.join(TESTS, folder, name), encoding="utf-8") as handle:
                    if re.search(r"pytest\.mark\.e2e\b", handle.read()):
                        holders.add(f"tests/{folder}/{name}")
    assert holders and all(worker_scope(f"{path}::test_x") == "e2e" for path in holders)
    assert set(E2E_FILES_ELSEWHERE) <= holders


@pytest.mark.parametrize("nodeid, scope", [
    ("tests/e2e/test_no_hang.py::test_async[2]", "e2e"),
    ("tests/unit/test_two_runs.py::test_a_second_job", "e2e"),
    ("tests/unit/test_window.py::test_schedule_records_exactly_the_window", "tests/unit/test_window.py"),
])
def test_a_worker_takes_the_e2e_group_whole_and_unit_tests_file_by_file(nodeid, scope):
    assert worker_scope(nodeid) == scope
