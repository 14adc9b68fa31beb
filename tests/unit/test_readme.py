"""README's promises that a test can hold it to."""

import os
import re

from mindspeed_prof.config.profiler_config import KNOBS, flag_name

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


def test_every_flag_is_in_the_readme_flag_table():
    table = read("README.md").split("## Flags", 1)[1].split("\n## ", 1)[0]
    missing = [flag_name(k) for k in KNOBS if f"`{flag_name(k)}" not in table]
    assert missing == []
