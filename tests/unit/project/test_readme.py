"""README's promises that a test can hold it to (docs/' pages: test_docs.py, which also checks
every flag against docs/flags.md)."""

import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


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



def test_the_first_screen_reaches_profiling_checking_and_the_report():
    # issue 37: a newcomer sees the three things a user does before any set-up detail
    first_screen = "\n".join(read("README.md").splitlines()[:40])
    for command in ("mindspeed-prof adapt-script", "mindspeed-prof check",
                    "mindspeed-prof report"):
        assert command in first_screen, command


def test_the_readme_keeps_test_timings_and_tier_status_in_docs_development():
    readme, development = read("README.md"), read("docs", "development.md")
    assert "not re-run this round" not in readme and "not re-run this round" in development
    assert not re.search(r"\d+ s and \d+ s|\d+ to \d+ minutes", readme)
    assert "857 s" in development and "411 s" in development


def test_where_no_gpu_is_present_the_readme_names_pytorchs_cpu_wheels():
    setup = read("README.md").split("## Set up", 1)[1].split("\n## ", 1)[0]
    assert "no GPU" in setup and "--index-url https://download.pytorch.org/whl/cpu" in setup


def test_the_readmes_adapted_copy_is_what_adapt_script_writes(tmp_path, capsys):
    from mindspeed_prof.cli import main

    section = read("README.md").split("The copy differs from the original", 1)[1]
    adapted = re.search(r"```bash\n(.+?)\n```", section, re.S)[1]
    # the original: the adapted lines without what adapt-script adds
    original = "\n".join(line for line in adapted.splitlines()
                         if not line.startswith(("# mindspeed-prof adapt-script",
                                                 "PROFILE_ARGS=")))
    original = original.replace(" -m mindspeed_prof.launch", "").replace(
        ' "${PROFILE_ARGS[@]}"', "")
    script = tmp_path / "pretrain_gpt.sh"
    script.write_text(original + "\n")
    flags = re.search(r"PROFILE_ARGS=\(--profile (.+)\)", adapted)[1].split()
    assert main(["adapt-script", str(script), *flags]) == 0, capsys.readouterr().err
    assert (tmp_path / "pretrain_gpt_profile.sh").read_text() == adapted + "\n"
