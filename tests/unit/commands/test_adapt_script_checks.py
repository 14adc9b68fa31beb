"""adapt-script holds the flags to the script's own values, and refuses entries whose loop
mindspeed_prof does not hook, before the job spends minutes building its model."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mindspeed_prof import cli

SCRIPTS = Path(__file__).resolve().parents[2] / "data" / "launch_scripts"


def copy(tmp_path, name, entry=None):
    text = (SCRIPTS / name).read_text()
    if entry is not None:
        text = text.replace("pretrain_gpt.py", entry)
    path = tmp_path / name
    path.write_text(text)
    return path


def adapt(capsys, script, *flags):
    code = cli.main(["adapt-script", str(script), "-o", str(script.with_name("out.sh")),
                     *map(str, flags)])
    return code, capsys.readouterr().err


def test_a_rank_the_scripts_own_nproc_and_nodes_do_not_start_is_refused_with_the_sum(
        tmp_path, capsys):
    script = copy(tmp_path, "megatron_gpt_arrays.sh")  # GPUS_PER_NODE=4, NUM_NODES=1
    code, err = adapt(capsys, script, "--profile-ranks", "0", "9")
    assert code == 2 and not script.with_name("out.sh").exists()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert ("line 56: --profile-ranks 0 9 names rank(s) 9, but the job starts 4 ranks "
            "(--nproc_per_node 4 (GPUS_PER_NODE=4 on line 8) x --nnodes 1 (NUM_NODES=1 on line "
            "11)), numbered 0-3: choose ranks among them (-1 for every rank)") in err


def test_ranks_of_a_multi_node_script_count_every_node(tmp_path, capsys):
    script = copy(tmp_path, "mindspeed_llm_torchrun_moe.sh")  # 8 per node x 2 nodes
    assert adapt(capsys, script, "--profile-ranks", "15")[0] == 0
    code, err = adapt(capsys, script, "--profile-ranks", "16", "--force")
    assert code == 2 and "the job starts 16 ranks" in err


def test_a_window_past_the_scripts_train_iters_is_refused_naming_both(tmp_path, capsys):
    script = copy(tmp_path, "megatron_gpt_arrays.sh")  # --train-iters 200
    code, err = adapt(capsys, script, "--profile-step-start", "199", "--profile-step-end", "205")
    assert code == 2 and not script.with_name("out.sh").exists()
    assert "line 56 trains 200 iterations (--train-iters 200): --profile-step-end 205" in err


def test_values_the_environment_may_set_or_a_branch_chooses_are_not_judged(tmp_path, capsys):
    # nodes_if_else.sh assigns its node count per branch: no world size is known, nothing refused
    script = copy(tmp_path, "nodes_if_else.sh")
    assert adapt(capsys, script, "--profile-ranks", "63", "--profile-step-start", "3",
                 "--profile-step-end", "5")[0] == 0


def test_an_fsdp2_entry_named_like_training_is_refused_with_what_it_runs(tmp_path, capsys):
    script = copy(tmp_path, "megatron_gpt_arrays.sh", entry="train_fsdp2.py")
    code, err = adapt(capsys, script)
    assert code == 2 and not script.with_name("out.sh").exists()
    assert ("line 56: train_fsdp2.py runs MindSpeed-LLM's FSDP2 trainer (torch FSDP2 with a "
            "loop of its own in mindspeed_llm.fsdp2, never megatron.training's train()); "
            "mindspeed_prof hooks Megatron's training loop") in err
    assert "--line 56 adapts it anyway" in err
    code, err = adapt(capsys, script, "--line", "56")
    assert code == 0 and "note: " in err and "adapted anyway: --line chose it" in err


def test_an_entry_file_that_trains_with_deepspeed_is_refused_when_it_can_be_read(
        tmp_path, capsys):
    script = copy(tmp_path, "megatron_gpt_arrays.sh", entry="train_lm.py")
    (tmp_path / "train_lm.py").write_text("import deepspeed\nengine = deepspeed.initialize()\n")
    code, err = adapt(capsys, script)
    assert code == 2 and "train_lm.py runs DeepSpeed, and calls no Megatron entry" in err
    (tmp_path / "train_lm.py").write_text("from megatron.training import pretrain\npretrain()\n")
    assert adapt(capsys, script)[0] == 0


@pytest.mark.slow  # launches the adapted script
def test_the_exit_error_of_a_launched_script_that_ran_no_hooked_loop_names_what_ran(tmp_path):
    entry = tmp_path / "train_fsdp2.py"
    entry.write_text("import torch.distributed.fsdp\nfor step in range(3):\n    pass\n")
    result = subprocess.run([sys.executable, "-m", "mindspeed_prof.launch", str(entry),
                             "--profile"], capture_output=True, text=True, cwd=tmp_path,
                            env=dict(os.environ, MINDSPEED_PROF_AUTOLOAD="0"), timeout=120)
    assert result.returncode == 0, result.stderr
    assert ("--profile was given, but train_fsdp2.py ran no loop mindspeed_prof hooks, so "
            "nothing was profiled: it never imported megatron.training; it ran torch FSDP "
            "instead.") in result.stderr
    # it ran under the launcher: the fix is not to use the launcher it already uses
    assert "run the script with `python -m mindspeed_prof.launch`" not in result.stderr
    assert "call mindspeed_prof.profile() around it" in result.stderr
