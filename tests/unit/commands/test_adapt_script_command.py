"""`mindspeed-prof adapt-script`: what it writes, what it refuses, what it prints, exit codes."""

import os
import shutil
import stat
from pathlib import Path

import pytest

from mindspeed_prof import cli

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "launch_scripts" / "megatron_gpt_arrays.sh"
FLAGS = ["--profile-step-start", "3", "--profile-step-end", "5", "--profile-ranks", "0", "1"]


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "pretrain_gpt.sh"
    shutil.copyfile(FIXTURE, path)
    path.chmod(0o750)
    return path


def adapt(*argv):
    return cli.main(["adapt-script", *map(str, argv)])


def snapshot(path):
    return path.read_bytes(), os.stat(path).st_mtime_ns


def test_writes_profile_copy_beside_the_script_with_its_mode_bits(script, capsys):
    before = snapshot(script)
    assert adapt(script, *FLAGS) == 0
    out = script.with_name("pretrain_gpt_profile.sh")
    assert stat.S_IMODE(out.stat().st_mode) == 0o750
    assert "-m mindspeed_prof.launch pretrain_gpt.py" in out.read_text()
    assert ("PROFILE_ARGS=(--profile --profile-step-start 3 --profile-step-end 5 "
            "--profile-ranks 0 1)") in out.read_text()
    assert snapshot(script) == before
    assert f"wrote {out}" in capsys.readouterr().err


def test_prints_a_unified_diff_of_the_changes(script, capsys):
    out = script.with_name("copy.sh")
    adapt(script, "-o", out, *FLAGS)
    diff = capsys.readouterr().out.splitlines()
    assert diff[:2] == [f"--- {script}", f"+++ {out}"]
    assert "+PROFILE_ARGS=(--profile --profile-step-start 3 --profile-step-end 5 " \
           "--profile-ranks 0 1)" in diff
    assert "-torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \\" in diff
    assert not [line for line in diff if line.startswith("-") and not line.startswith("---")
                and line.replace("-", "+", 1) in diff]  # no line removed and re-added as is


def test_bad_flag_value_exits_2_naming_the_flag_and_writes_nothing(script, capsys):
    assert adapt(script, "--profile-step-start", "5", "--profile-step-end", "3") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--profile-step-end 3 must be >" in err
    assert "Traceback" not in err
    assert sorted(p.name for p in script.parent.iterdir()) == [script.name]


def test_unknown_option_is_a_usage_error(script, capsys):
    assert adapt(script, "--profile-step-strat", "5") == 2
    assert "did you mean --profile-step-start?" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link"])
def test_output_that_is_the_script_itself_is_refused_even_with_force(script, how, capsys):
    target = script
    if how == "symlink":
        target = script.with_name("link.sh")
        target.symlink_to(script)
    elif how == "hard link":
        target = script.with_name("hard.sh")
        os.link(script, target)
    before = snapshot(script)
    assert adapt(script, "-o", target, "--force", *FLAGS) == 2
    assert "never modifies" in capsys.readouterr().err
    assert snapshot(script) == before


def test_existing_output_needs_force(script, capsys):
    out = script.with_name("pretrain_gpt_profile.sh")
    out.write_text("keep me\n")
    assert adapt(script, *FLAGS) == 2
    assert "pass --force" in capsys.readouterr().err
    assert out.read_text() == "keep me\n"
    assert adapt(script, "--force", *FLAGS) == 0
    assert "mindspeed_prof.launch" in out.read_text()


def test_force_replaces_a_symlinked_output_not_its_target(script, tmp_path):
    elsewhere = tmp_path / "elsewhere.sh"
    elsewhere.write_text("untouched\n")
    out = script.with_name("out.sh")
    out.symlink_to(elsewhere)
    assert adapt(script, "-o", out, "--force", *FLAGS) == 0
    assert not out.is_symlink() and elsewhere.read_text() == "untouched\n"


def test_adapting_an_adapted_script_with_the_same_flags_writes_nothing(script, capsys):
    adapted = script.with_name("pretrain_gpt_profile.sh")
    adapt(script, *FLAGS)
    capsys.readouterr()
    assert adapt(adapted, *FLAGS) == 0
    captured = capsys.readouterr()
    assert "nothing to do" in captured.err and captured.out == ""
    assert not script.with_name("pretrain_gpt_profile_profile.sh").exists()


def test_readapting_with_new_flags_says_what_changed(script, capsys):
    adapted = script.with_name("pretrain_gpt_profile.sh")
    adapt(script, *FLAGS)
    capsys.readouterr()
    assert adapt(adapted, "-o", script.with_name("v2.sh"), "--profile-step-start", "7") == 0
    captured = capsys.readouterr()
    assert "+PROFILE_ARGS=(--profile --profile-step-start 7)" in captured.out.splitlines()
    assert "PROFILE_ARGS was (--profile --profile-step-start 3" in captured.err


def test_unreadable_script_exits_2_naming_it(tmp_path, capsys):
    missing = tmp_path / "nope.sh"
    assert adapt(missing, *FLAGS) == 2
    err = capsys.readouterr().err
    assert f"cannot read {missing}" in err and "Traceback" not in err


def test_unrecognizable_script_exits_2_listing_commands(tmp_path, capsys):
    script = tmp_path / "prep.sh"
    script.write_text("python tools/preprocess_data.py --input x\n")
    assert adapt(script, *FLAGS) == 2
    err = capsys.readouterr().err
    assert "no training command found" in err
    assert "line 1: python tools/preprocess_data.py (looks like data preprocessing)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prep.sh"]


def test_flags_before_the_script_get_a_hint(capsys):
    assert cli.main(["adapt-script", "--profile-step-start", "5"]) == 2
    assert "give IN.sh before the flags" in capsys.readouterr().err


def test_bytes_that_are_not_utf8_are_kept(tmp_path):
    script = tmp_path / "latin.sh"
    script.write_bytes(b"# caf\xe9\ntorchrun pretrain_gpt.py\n")
    assert adapt(script, *FLAGS) == 0
    assert tmp_path.joinpath("latin_profile.sh").read_bytes().startswith(b"# caf\xe9\n")


def test_line_option_adapts_only_that_command(tmp_path, capsys):
    script = tmp_path / "two.sh"
    script.write_text("if [ -n \"$A\" ]; then\n  torchrun pretrain_gpt.py\nelse\n"
                      "  torchrun pretrain_bert.py\nfi\n")
    assert adapt(script, "--line", "4", *FLAGS) == 0
    text = tmp_path.joinpath("two_profile.sh").read_text()
    assert "torchrun pretrain_gpt.py\n" in text
    assert "torchrun -m mindspeed_prof.launch pretrain_bert.py" in text


def test_no_temporary_file_is_left_behind(script):
    adapt(script, *FLAGS)
    adapt(script, *FLAGS)  # refused: exists
    assert sorted(p.name for p in script.parent.iterdir()) == [
        "pretrain_gpt.sh", "pretrain_gpt_profile.sh"]


def test_unwritable_folder_exits_2_naming_the_output(script, monkeypatch, capsys):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("tempfile.mkstemp", refuse)
    assert adapt(script, *FLAGS) == 2
    err = capsys.readouterr().err
    assert "cannot write" in err and "Permission denied" in err and "Traceback" not in err


def test_missing_output_folder_exits_2(script, tmp_path, capsys):
    assert adapt(script, "-o", tmp_path / "no" / "out.sh", *FLAGS) == 2
    assert "does not exist" in capsys.readouterr().err


SLURM = Path(__file__).resolve().parents[2] / "data" / "launch_scripts" / "slurm_run_cmd.sh"


def test_slurm_script_gets_its_command_string_adapted(tmp_path, capsys):
    script = tmp_path / "slurm.sh"
    shutil.copyfile(SLURM, script)
    assert adapt(script, *FLAGS) == 0
    text = tmp_path.joinpath("slurm_profile.sh").read_text()
    assert 'run_cmd="python -u -m mindspeed_prof.launch ${MEGATRON}/pretrain_gpt.py' in text
    assert 'sh -c "${run_cmd}"\n' in text
    assert "adapted the training command at line 19 of" in capsys.readouterr().err


def test_single_quoted_command_string_run_by_sh_c_exits_2_with_the_reason(tmp_path, capsys):
    script = tmp_path / "quoted.sh"
    script.write_text("CMD='torchrun pretrain_gpt.py'\nsrun sh -c \"$CMD\"\n")
    assert adapt(script, *FLAGS) == 2
    err = capsys.readouterr().err
    assert "in single quotes" in err and "--line N" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quoted.sh"]


def test_crlf_script_is_written_with_crlf_line_endings_only(tmp_path):
    script = tmp_path / "win.sh"
    script.write_bytes(b"#!/bin/bash\r\nARGS=\"--x 1\"\r\ntorchrun pretrain_gpt.py $ARGS\r\n")
    assert adapt(script, *FLAGS) == 0
    written = tmp_path.joinpath("win_profile.sh").read_bytes()
    assert written.count(b"\n") == written.count(b"\r\n") == 5
    assert b'$ARGS "${PROFILE_ARGS[@]}"\r\n' in written


def test_inference_script_is_reported_as_an_inference_command(tmp_path, capsys):
    script = tmp_path / "generate.sh"
    script.write_text("torchrun $DISTRIBUTED_ARGS inference.py --max-new-tokens 8\n")
    assert adapt(script, *FLAGS) == 0
    err = capsys.readouterr().err
    assert "adapted the inference command at line 1" in err and "count requests" in err


TORCH_PROFILED = ("#!/bin/bash\nGPT_ARGS=(\n    --num-layers 2\n    --use-pytorch-profiler\n)\n"
                  'torchrun --standalone pretrain_gpt.py "${GPT_ARGS[@]}"\n')


def test_script_with_use_pytorch_profiler_exits_2_naming_file_line_and_fix(tmp_path, capsys):
    script = tmp_path / "torch_profiled.sh"
    script.write_text(TORCH_PROFILED)
    assert adapt(script, *FLAGS) == 2
    err = capsys.readouterr().err
    assert f"{script}: line 6: the training command passes --use-pytorch-profiler " \
           f"($GPT_ARGS on line 4)" in err
    assert "--drop-use-pytorch-profiler" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["torch_profiled.sh"]


def test_drop_use_pytorch_profiler_writes_a_copy_without_it_and_keeps_the_original(
        tmp_path, capsys):
    script = tmp_path / "torch_profiled.sh"
    script.write_text(TORCH_PROFILED)
    before = snapshot(script)
    assert adapt(script, "--drop-use-pytorch-profiler", *FLAGS) == 0
    copy = tmp_path.joinpath("torch_profiled_profile.sh").read_text()
    assert "--use-pytorch-profiler" not in copy and "    --num-layers 2\n)\n" in copy
    assert snapshot(script) == before
    captured = capsys.readouterr()
    assert "-    --use-pytorch-profiler" in captured.out.splitlines()
    assert "note: line 4: --use-pytorch-profiler (in GPT_ARGS) is left out of the copy" \
        in captured.err


def test_megatron_sbatch_heredoc_script_is_adapted_in_its_command_string(tmp_path, capsys):
    source = FIXTURE.with_name("sbatch_heredoc_training_cmd.sh")
    script = tmp_path / "sbatch_job.sh"
    script.write_bytes(source.read_bytes().replace(b"\n", b"\r\n"))
    assert adapt(script, *FLAGS) == 0
    written = tmp_path.joinpath("sbatch_job_profile.sh").read_bytes()
    assert written.count(b"\n") == written.count(b"\r\n") == source.read_text().count("\n") + 2
    assert (b"${NSYS_PREFIX} python -m mindspeed_prof.launch ${MEGATRON_PATH}/pretrain_gpt.py "
            b"${TRAIN_ARGS[@]} $PROFILE_ARGS\"\r\n") in written
    assert "adapted the training command at line 28 of" in capsys.readouterr().err


def test_refusal_names_the_script_and_gives_the_lines_to_paste(tmp_path, capsys):
    script = tmp_path / "remote.sh"
    script.write_text('ssh node1 "torchrun pretrain_gpt.py"\n')
    assert adapt(script, *FLAGS) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mindspeed-prof adapt-script: error: {script}: no training command "
                          f"found")
    assert "paste these two lines above the statement on line 1:" in err
    assert "PROFILE_ARGS=(--profile --profile-step-start 3 --profile-step-end 5 " \
           "--profile-ranks 0 1)" in err
