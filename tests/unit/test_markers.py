"""The test selection the docs name: every test marked `slow` by name still exists, so the loop
to run between edits (`-m "not e2e and not slow"`) does not silently grow back."""

import os
import re

from conftest import SLOW_UNIT_TESTS, TESTS


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
