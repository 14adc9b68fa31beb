"""docs/: what the pages promise that a test can hold them to (the README's own checks are in
test_readme.py)."""

import argparse
import importlib.util
import os
import re

import pytest

from helpers.doc_samples import unprinted
from mindspeed_prof.cli import build_parser
from mindspeed_prof.config.profiler_config import KNOBS, flag_name

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DOCS = os.path.join(REPO, "docs")


def read(*parts):
    with open(os.path.join(REPO, *parts), encoding="utf-8") as handle:
        return handle.read()


def gen_flags_doc():
    spec = importlib.util.spec_from_file_location(
        "gen_flags_doc", os.path.join(REPO, "scripts", "gen_flags_doc.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def table_rows(text, begin):
    """The rows of the generated table after the marker ``begin``: lists of cells, unescaped."""
    block = text.split(begin, 1)[1].split("\n", 1)[1].split("<!-- end of", 1)[0]
    rows = []
    for line in block.strip().splitlines()[2:]:
        cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
        rows.append([" ".join(c.replace("\\|", "|").replace("\\*", "*").split()) for c in cells])
    return rows


def subcommands():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def profile_help_actions():
    """The profile flags exactly as `mindspeed-prof show-config --help` declares them."""
    parser = subcommands()["show-config"]
    return [a for a in parser._actions if a.dest == "profile_argv"]


def test_the_generated_tables_are_what_the_definitions_make_now():
    assert gen_flags_doc().stale() == [], "run python scripts/gen_flags_doc.py"


def test_every_flag_of_help_is_in_docs_flags_with_its_help_line_and_default():
    rows = {row[0].strip("`").split()[0]: row
            for row in table_rows(read("docs", "flags.md"), "<!-- flag table")}
    shown = profile_help_actions()
    assert sorted(rows) == sorted(a.option_strings[0] for a in shown)
    assert sorted(rows) == sorted(flag_name(k) for k in KNOBS)
    for action in shown:
        text = " ".join(action.help.replace("%%", "%").split())
        match = re.search(r"\(default: (.*); expects (.*)\)$", text)
        knob = action.option_strings[0][2:].replace("-", "_")
        # A switch's --help states no default: it is the knob's own (argparse's False is not it).
        switch = "on" if KNOBS[knob].default is True else "off"
        what, default = (text[:match.start()].strip(), match[1]) if match else (text, switch)
        row = rows[action.option_strings[0]]
        assert row[1] == what, action.option_strings[0]
        assert row[2].strip("`") == default, action.option_strings[0]


def test_docs_flags_shows_profile_with_cpu_on_as_its_knob_defines_it():
    # argparse's default of a store_true is False; an untyped --profile-with-cpu means on.
    rows = {row[0].strip("`").split()[0]: row
            for row in table_rows(read("docs", "flags.md"), "<!-- flag table")}
    assert KNOBS["profile_with_cpu"].default is True
    assert rows["--profile-with-cpu"][2] == "on"
    assert rows["--profile-with-stack"][2] == "off"


def test_profile_ranks_help_names_the_hosts_default_not_rank_0_alone():
    # An untyped --profile-ranks takes Megatron-LM's own default: every rank from 0.17.
    (action,) = [a for a in profile_help_actions() if a.option_strings[0] == "--profile-ranks"]
    default = re.search(r"\(default: (.*); expects", " ".join(action.help.split()))[1]
    assert default != "0"
    assert "[] = every rank from 0.17" in default and "--megatron-version" in default


def test_the_commands_table_lists_every_command_of_help_with_each_of_its_options():
    rows = {row[0].strip("`").split()[1]: row[0]
            for row in table_rows(read("docs", "output.md"), "<!-- command table")}
    commands = subcommands()
    assert sorted(rows) == sorted(commands)
    for command, parser in commands.items():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or action.dest == "profile_argv":
                continue
            words = action.option_strings or [action.metavar or action.dest.upper()]
            assert words[0] in rows[command], (command, words[0])
            for choice in action.choices or ():
                assert choice in rows[command], (command, choice)


def test_the_commands_table_names_engine_step_and_the_megatron_version_of_show_config():
    row = [r[0] for r in table_rows(read("docs", "output.md"), "<!-- command table")
           if "show-config" in r[0]][0]
    assert "engine-step" in row and "--megatron-version X.Y" in row


def test_the_flags_notes_name_only_flags_that_exist():
    notes = read("docs", "flags.md").split("## Notes on some flags", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(--profile[a-z-]*[a-z])", notes))
    flags = [flag_name(k) for k in KNOBS]
    unknown = [n for n in named if n not in flags and not any(f.startswith(n + "-") for f in flags)]
    assert unknown == []


def test_windows_lists_every_trigger_state():
    from mindspeed_prof.control import trigger
    text = read("docs", "windows.md")
    listed = re.findall(r"\w+", text.split("--status` shows each")[1].split(";")[0])
    assert set(trigger.STATES) <= set(listed), listed


def markdown_pages():
    pages = ["README.md", os.path.join("tests", "README.md")] + [
        os.path.join("docs", name) for name in sorted(os.listdir(DOCS)) if name.endswith(".md")]
    return pages


def anchors(path):
    """GitHub's heading anchors of a markdown file."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", read(path), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("page", markdown_pages())
def test_every_link_of_the_page_reaches_a_file_and_heading_that_exist(page):
    text = re.sub(r"```.*?```", "", read(page), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(os.path.join(REPO, resolved)):
            broken.append(target)
        elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
            broken.append(target)
    assert broken == []


def test_the_readme_stays_a_front_door():
    assert len(read("README.md").splitlines()) <= 250


def test_the_tests_map_names_every_folder_of_tests_and_nothing_else():
    table = read("tests", "README.md").split("| folder", 1)[1].split("\n\n", 1)[0]
    listed = {line.split("|")[1].strip().strip("`/") for line in table.splitlines()[2:]}
    folders = {name for name in os.listdir(os.path.join(REPO, "tests"))
               if os.path.isdir(os.path.join(REPO, "tests", name)) and not name.startswith(
                   ("__", "."))}
    assert listed == folders


def test_the_unit_tests_map_names_every_folder_of_tests_unit_and_nothing_else():
    table = read("tests", "README.md").split("## Inside `unit/`", 1)[1].split("| folder", 1)[1]
    listed = {line.split("|")[1].strip().strip("`/").removeprefix("unit/")
              for line in table.split("\n\n", 1)[0].splitlines()[2:]}
    unit = os.path.join(REPO, "tests", "unit")
    folders = {name for name in os.listdir(unit)
               if os.path.isdir(os.path.join(unit, name)) and not name.startswith(("__", "."))}
    assert listed == folders


# Sample outputs: a fenced block of docs/ that starts with `$ mindspeed-prof ...` is that
# command's output on the 2-rank gloo job of the tests (profile_dir). Its numbers are the run's
# own (they differ from run to run); its words, columns and lines must be what the command
# prints today, so a sample cannot drift from the code again (issue 35).
OPTIONAL = ("Operators (self time) that grew", "Operators (self time) that shrank")


def samples():
    """(page, command, its lines) of every sample in docs/."""
    found = []
    for page in sorted(os.listdir(DOCS)):
        if page.endswith(".md"):
            for block in re.findall(r"```\n(\$ mindspeed-prof .+?)\n```", read("docs", page),
                                    re.S):
                command, *lines = block.split("\n")
                found.append((page, command[2:], lines))
    return found


@pytest.fixture(scope="module")
def gloo_job(tmp_path_factory):
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("gloo") / "profile_dir"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.path.join(REPO, "tests")]))
    done = subprocess.run([sys.executable, "-m", "output_fixtures.gloo_job", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_docs_hold_samples_of_timeline_and_diff():
    assert [(page, command.split()[1]) for page, command, _ in samples()] == [
        ("analysis.md", "timeline"), ("analysis.md", "diff")]


@pytest.mark.slow  # the module's gloo job (`gloo_job`)
@pytest.mark.parametrize("index", range(2))
def test_each_sample_output_in_the_docs_is_what_its_command_prints_today(
        index, gloo_job, capsys, monkeypatch):
    import shlex

    from mindspeed_prof.cli import main

    page, command, lines = samples()[index]
    monkeypatch.chdir(gloo_job.parent)
    argv = shlex.split(command)[1:]
    code = main(argv)
    printed = capsys.readouterr().out.splitlines()
    assert code in (0, 1), printed
    missing = unprinted(lines, printed, OPTIONAL)
    assert missing == [], (
        f"docs/{page}: the sample of `{command}` is not what it prints today; lines not "
        f"printed: {missing}; today it prints:\n" + "\n".join(printed))


def test_the_report_pages_size_line_is_what_report_prints(tmp_path, capsys, monkeypatch):
    pytest.importorskip("plotly")
    from mindspeed_prof.cli import main
    from output_fixtures.simulated_job import simulated_job

    [sample] = [line for line in read("docs", "report.md").splitlines()
                if line.startswith("report written to ")]
    monkeypatch.chdir(tmp_path)
    assert main(["report", simulated_job("prof", ranks=2), "-o", "report.html"]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines()
               if line.startswith("report written to ")]
    assert unprinted([sample], printed) == [], printed


def test_every_page_names_only_profile_flags_that_exist():
    # docs/report.md once cited --profile-anomaly, a flag that never existed (issue 35)
    flags = [flag_name(k) for k in KNOBS]
    pages = ["README.md"] + [os.path.join("docs", p) for p in sorted(os.listdir(DOCS))
                             if p.endswith(".md")]
    unknown = {}
    for page in pages:
        named = set(re.findall(r"`(--profile[a-z0-9-]*[a-z0-9])", read(page)))
        bad = [n for n in named if n not in flags and not any(f.startswith(n + "-") for f in flags)]
        if bad:
            unknown[page] = sorted(bad)
    assert unknown == {}
