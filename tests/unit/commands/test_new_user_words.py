"""What a new user met on the CLI: each surface says one clear thing, once, in plain grammar."""

import os
import re
import subprocess
import sys

from helpers.cli import run_cli
from mindspeed_prof import ProfilerConfig
from output_fixtures.torch_traces import torch_trace

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_check_of_an_empty_folder_prints_no_empty_table_header(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "check", tmp_path)
    assert code == 1
    assert "RANK" not in out and "VERDICT" not in out
    assert f"warning: no profiler output under {tmp_path}" in out
    assert out.rstrip().endswith("nothing checked: exit 1")


def test_summary_of_an_empty_folder_says_why_once(tmp_path, capsys):
    code, out, err = run_cli(capsys, "summary", tmp_path)
    assert code == 1
    said = "nothing to summarise under"
    assert (out + err).count(said) == 1, (out, err)
    code, out, err = run_cli(capsys, "summary", tmp_path, "--json")  # stdout is for machines
    assert code == 1 and err.count(said) == 1


def test_analyse_of_a_torch_backend_folder_says_there_is_no_npu_data_not_that_it_needs_torch_npu(
        tmp_path):
    torch_trace(str(tmp_path), rank=0)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_TORCH_NPU")}
    result = subprocess.run([sys.executable, "-m", "mindspeed_prof.cli", "analyse",
                             str(tmp_path)], env=env, capture_output=True, text=True,
                            timeout=300, cwd=REPO)
    assert "needs torch_npu" not in result.stderr, result.stderr
    assert ("nothing to parse: no raw NPU data here (its 1 capture(s) are torch backend output, "
            "readable as they are)") in result.stderr
    assert result.returncode == 0, result.stdout  # check's exit: the trace is valid


def test_the_demo_extra_carries_what_summary_plot_needs():
    with open(os.path.join(REPO, "setup.py"), encoding="utf-8") as handle:
        text = handle.read()
    demo = re.search(r'"demo": \[([^\]]*)\]', text)[1]
    assert "matplotlib" in demo


def test_one_knob_applies_and_several_apply():
    one = ProfilerConfig(profile=True, profile_capture_steps=5).warnings()
    assert "--profile-capture-steps applies only with --profile-on-slow-step or " \
           "--profile-on-straggler; without either no capture is taken." in one
    two = ProfilerConfig(profile=True, profile_capture_steps=5, profile_max_captures=2).warnings()
    assert "--profile-capture-steps, --profile-max-captures apply only with" in " ".join(two)
    assert not any("only apply" in note or "only applies" in note for note in one + two)
