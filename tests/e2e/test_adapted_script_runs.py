"""An adapted launch script, run by bash, profiles the rank and iterations its flags ask for.

The harness's Megatron-shaped ``pretrain_gpt.sh`` is adapted with ``mindspeed-prof
adapt-script`` (the CLI, as a user would) into a copy in a temporary folder, and that copy is run
with bash: torchrun, ``-m mindspeed_prof.launch``, the CPU Megatron stand-in. Only the requested
rank profiles, and exactly the requested iterations, which proves the flags in PROFILE_ARGS
reached the training loop.
"""

import json
import sys
from pathlib import Path

import pytest

from mindspeed_prof import cli

REPO = Path(__file__).resolve().parents[2]
NEEDED = ("tests/harness/launch.py", "tests/harness/pretrain_gpt.sh", "mindspeed_prof/launch.py")
MISSING = [path for path in NEEDED if not (REPO / path).is_file()]
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} (not written yet)"),
]
if not MISSING:
    from harness import launch as harness

START, END, RANK = 3, 5, 1


def adapt(source, target, *flags):
    assert cli.main(["adapt-script", str(source), "-o", str(target), *map(str, flags)]) == 0
    return target


def test_adapted_harness_script_profiles_only_the_requested_rank_and_iterations(tmp_path):
    save = tmp_path / "profile"
    script = adapt(harness.LAUNCH_SCRIPT, tmp_path / "pretrain_gpt_profile.sh",
                   "--profile-step-start", START, "--profile-step-end", END,
                   "--profile-ranks", RANK, "--profile-backend", "torch",
                   "--profile-save-path", save)
    run = harness.run_script(script, tmp_path=tmp_path, nproc=2, timeout=300).check()

    for rank in (0, 1):
        assert run.report(rank)["train_step_iterations"] == [1, 2, 3, 4, 5, 6], run.describe()
    assert not (save / "profile_manifest_rank0.json").exists()
    manifest = json.loads((save / f"profile_manifest_rank{RANK}.json").read_text())
    (window,) = manifest["windows"]
    assert (window["start"], window["end"]) == (START, END)
    assert window["iterations_recorded"] == [START, END - 1]
    assert manifest["status"] == "complete", manifest["errors"]
    assert list(save.glob(f"rank{RANK}.*.pt.trace.json")), sorted(p.name for p in save.iterdir())


STAND_IN = """import json, os, sys
with open(os.environ["ARGV_OUT"], "w") as out:
    json.dump(sys.argv[1:], out)
"""
LAUNCH_SCRIPT = """#!/bin/bash
DISTRIBUTED_ARGS="
    --nproc_per_node 1 \\
    --master_port 29571
"
GPT_ARGS="
    --num-layers 2 \\
"
python -m torch.distributed.launch $DISTRIBUTED_ARGS pretrain_standin.py \\
    $GPT_ARGS \\
    | tee launch.log
"""


def test_adapted_torch_distributed_launch_command_reaches_the_training_script(tmp_path):
    (tmp_path / "pretrain_standin.py").write_text(STAND_IN)
    (tmp_path / "run.sh").write_text(LAUNCH_SCRIPT)
    script = adapt(tmp_path / "run.sh", tmp_path / "run_profile.sh", "--profile-step-start", 2)
    env = harness.harness_env(tmp_path, ARGV_OUT=tmp_path / "argv.json",
                              PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    run = harness.run_script(script, env=env, cwd=tmp_path, timeout=120)
    assert (tmp_path / "argv.json").is_file(), run.describe()  # `| tee` hides the exit status
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[-3:] == ["--profile", "--profile-step-start", "2"]
    assert "--num-layers" in argv and any(a.startswith("--local-rank") for a in argv)


# SLURM is not installed here: this srun skips its own options and runs the command, once.
FAKE_SRUN = """#!/bin/sh
while [ "${1#-}" != "$1" ]; do shift; done
exec "$@"
"""
SLURM_TAIL = """
run_cmd="torchrun ${DISTRIBUTED_ARGS[*]} $MEGATRON_PATH/pretrain_gpt.py ${GPT_ARGS[*]} \\
${DATA_ARGS[*]} ${OUTPUT_ARGS[*]}"
timeout --signal=TERM 600 setsid srun -l --ntasks=1 sh -c "${run_cmd}"
"""


def test_adapted_slurm_script_with_a_command_string_profiles_the_requested_window(tmp_path):
    """Megatron-LM's SLURM shape: the command in a string, run by `timeout ... srun sh -c`."""
    harness_text = harness.LAUNCH_SCRIPT.read_text()
    source = tmp_path / "pretrain_gpt_slurm.sh"
    source.write_text(harness_text[:harness_text.rindex("torchrun ")] + SLURM_TAIL)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "srun").chmod(0o755)
    save = tmp_path / "profile"
    script = adapt(source, tmp_path / "pretrain_gpt_slurm_profile.sh",
                   "--profile-step-start", START, "--profile-step-end", END,
                   "--profile-ranks", RANK, "--profile-backend", "torch",
                   "--profile-save-path", save)
    assert 'run_cmd="torchrun ${DISTRIBUTED_ARGS[*]} -m mindspeed_prof.launch' in script.read_text()
    env = harness.harness_env(tmp_path)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    run = harness.run_script(script, env=env, cwd=tmp_path, nproc=2, timeout=300).check()

    for rank in (0, 1):
        assert run.report(rank)["train_step_iterations"] == [1, 2, 3, 4, 5, 6], run.describe()
    assert not (save / "profile_manifest_rank0.json").exists()
    manifest = json.loads((save / f"profile_manifest_rank{RANK}.json").read_text())
    (window,) = manifest["windows"]
    assert window["iterations_recorded"] == [START, END - 1]
    assert manifest["status"] == "complete", manifest["errors"]


# ... and this sbatch runs the batch script it reads on stdin at once and waits for it (as
# `sbatch --wait` does), with the interpreter its #! line names.
FAKE_SBATCH = """#!/bin/sh
script=$(mktemp)
cat > "$script"
interpreter=$(sed -n '1s/^#!//p' "$script")
${interpreter:?the batch script has no #! line} "$script"
status=$?
rm -f "$script"
exit $status
"""
# Megatron-LM's sbatch shape (examples/megatron_fsdp/sbatch_*.sh): a multi-line command string,
# pasted by the outer shell into the heredoc's `bash -c "..."` when sbatch is called.
SBATCH_TAIL = """
TRAINING_CMD="
cd ${PWD};
export PYTHONPATH=${PYTHONPATH};
torchrun ${DISTRIBUTED_ARGS[*]} $MEGATRON_PATH/pretrain_gpt.py ${GPT_ARGS[*]} \\
${DATA_ARGS[*]} ${OUTPUT_ARGS[*]}"

sbatch <<EOF
#!/bin/bash
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
srun -l --ntasks=1 \\
    bash -c "${TRAINING_CMD}" 2>&1 | tee ${PWD}/train_\\${SLURM_JOB_ID:-local}.log
EOF
"""
# A heredoc fed to bash: the launch is written in it, continued over lines, under exec, piped
# through tee.
BASH_HEREDOC_TAIL = """
bash <<EOF
set -eo pipefail
exec torchrun ${DISTRIBUTED_ARGS[*]} \\
    $MEGATRON_PATH/pretrain_gpt.py \\
    ${GPT_ARGS[*]} ${DATA_ARGS[*]} ${OUTPUT_ARGS[*]} 2>&1 | tee train.log
EOF
"""


def harness_with_tail(tmp_path, name, tail, replace=()):
    """The harness script with its torchrun command replaced by ``tail``, and fake srun/sbatch."""
    harness_text = harness.LAUNCH_SCRIPT.read_text()
    text = harness_text[:harness_text.rindex("torchrun ")] + tail
    for old, new in replace:
        assert old in text
        text = text.replace(old, new)
    source = tmp_path / name
    source.write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for program, stand_in in (("srun", FAKE_SRUN), ("sbatch", FAKE_SBATCH)):
        (bin_dir / program).write_text(stand_in)
        (bin_dir / program).chmod(0o755)
    env = harness.harness_env(tmp_path)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    return source, env


def assert_profiled_window(run, save):
    for rank in (0, 1):
        assert run.report(rank)["train_step_iterations"] == [1, 2, 3, 4, 5, 6], run.describe()
    assert not (save / "profile_manifest_rank0.json").exists()
    manifest = json.loads((save / f"profile_manifest_rank{RANK}.json").read_text())
    (window,) = manifest["windows"]
    assert window["iterations_recorded"] == [START, END - 1]
    assert manifest["status"] == "complete", manifest["errors"]


@pytest.mark.parametrize("name,tail,edited", [
    ("pretrain_gpt_sbatch.sh", SBATCH_TAIL, "$MEGATRON_PATH/pretrain_gpt.py ${GPT_ARGS[*]} \\\n"
                                            "${DATA_ARGS[*]} ${OUTPUT_ARGS[*]} $PROFILE_ARGS\""),
    ("pretrain_gpt_heredoc.sh", BASH_HEREDOC_TAIL,
     "${OUTPUT_ARGS[*]} $PROFILE_ARGS 2>&1 | tee train.log\nEOF"),
])
def test_adapted_heredoc_job_profiles_the_requested_window_into_a_path_with_quotes(
        name, tail, edited, tmp_path):
    """sbatch <<EOF ... bash -c "$TRAINING_CMD" and bash <<EOF ... exec torchrun | tee: the
    flags, a save path with a space and a quote included, reach the training loop."""
    source, env = harness_with_tail(tmp_path, name, tail)
    save = tmp_path / "profile it's"
    script = adapt(source, tmp_path / name.replace(".sh", "_profile.sh"),
                   "--profile-step-start", START, "--profile-step-end", END,
                   "--profile-ranks", RANK, "--profile-backend", "torch",
                   "--profile-save-path", save)
    assert edited in script.read_text()
    run = harness.run_script(script, env=env, cwd=tmp_path, nproc=2, timeout=300).check()
    assert_profiled_window(run, save)
    assert "mindspeed_prof" in (tmp_path / ("train_local.log" if "sbatch" in name
                                            else "train.log")).read_text()


def test_script_with_use_pytorch_profiler_is_refused_then_runs_profiled_once_dropped(
        tmp_path, capsys):
    source, env = harness_with_tail(tmp_path, "pretrain_gpt_torch_profiler.sh", (
        'torchrun "${DISTRIBUTED_ARGS[@]}" "$MEGATRON_PATH/pretrain_gpt.py" \\\n'
        '    "${GPT_ARGS[@]}" "${DATA_ARGS[@]}" "${OUTPUT_ARGS[@]}"\n'), replace=[(
            "    --distributed-backend gloo\n",
            f"    --distributed-backend gloo\n    --use-pytorch-profiler\n"
            f"    --tensorboard-dir {tmp_path / 'tb'}\n")])
    flags = ["--profile-step-start", START, "--profile-step-end", END, "--profile-ranks", RANK,
             "--profile-backend", "torch", "--profile-save-path", tmp_path / "profile"]
    target = tmp_path / "copy.sh"
    assert cli.main(["adapt-script", str(source), "-o", str(target), *map(str, flags)]) == 2
    assert "--drop-use-pytorch-profiler" in capsys.readouterr().err and not target.exists()
    script = adapt(source, target, "--drop-use-pytorch-profiler", *flags)
    run = harness.run_script(script, env=env, cwd=tmp_path, nproc=2, timeout=300).check()
    assert_profiled_window(run, tmp_path / "profile")
    assert run.report(RANK)["use_pytorch_profiler"] is False
    assert not (tmp_path / "tb").exists()
