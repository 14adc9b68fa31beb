"""README's promises that a test can hold it to (docs/' pages: test_docs.py, which also checks
every flag against docs/flags.md)."""

import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read(*parts):
    with open(os.path.join(REPO, *parts)) as handle:
        return handle.read()


def setup_commands():
    section = read("README.md").split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_readme_has_exactly_two_set_up_commands():
    commands = setup_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    assert commands[0].endswith("bash scripts/demo.sh")
    assert commands[1].endswith("python -m pytest")


def test_ci_runs_the_readme_test_command_verbatim():
    assert setup_commands()[1] in read(".ci", "run")

