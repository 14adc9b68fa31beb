"""adapt_script on launch scripts shaped like Megatron-LM's and MindSpeed-LLM's examples.

Every fixture in tests/data/launch_scripts is adapted and then checked four ways: the copy parses
(``bash -n``), the only changes are insertions of our own text, adapting again changes nothing,
and, run by the shell with stand-ins for python/torchrun that record their argv, the training
command gets the launcher and the flags exactly once while every other command runs as before.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindspeed_prof.errors import ConfigError
from mindspeed_prof.script.adapter import ARRAY_REF, STRING_REF, adapt_script, find_launches
from mindspeed_prof.script.scan import scan
from mindspeed_prof.script.words import dequote

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "launch_scripts"
FLAGS = ["--profile", "--profile-step-start", "3", "--profile-step-end", "5",
         "--profile-ranks", "1"]
LAUNCHER = ["-m", "mindspeed_prof.launch"]

# fixture -> ({env: value} for each way to run it, training script each run starts)
ADAPTABLE = {
    "megatron_gpt_arrays.sh": [({}, "pretrain_gpt.py")],
    "mindspeed_llm_launch_tee.sh": [({}, "pretrain_gpt.py")],
    "mindspeed_llm_torchrun_moe.sh": [({}, "posttrain_gpt.py")],
    "pipeline_preprocess_convert_train.sh": [({}, "pretrain_gpt.py")],
    "nodes_if_else.sh": [({"NNODES": "1"}, "pretrain_gpt.py"),
                         ({"NNODES": "2"}, "pretrain_gpt.py")],
    "case_models_python.sh": [({"MODEL": "gpt"}, "pretrain_gpt.py"),
                              ({"MODEL": "bert"}, "pretrain_bert.py")],
    "function_set_u.sh": [({}, "pretrain_gpt.py")],
    "posix_sh.sh": [({}, "pretrain_gpt.py")],
    "one_liners.sh": [({}, "pretrain_gpt.py")],
    "launcher_only.sh": [({}, "examples/run_simple_mcore_loop.py")],
    "slurm_run_cmd.sh": [({}, "pretrain_gpt.py")],
    "slurm_srun_timeout.sh": [({}, "pretrain_gpt.py")],
    "eval_cmd_substitution.sh": [({"MODEL": "gpt"}, "pretrain_gpt.py"),
                                 ({"MODEL": "bert"}, "pretrain_bert.py")],
    "mindspeed_llm_generate.sh": [({}, "inference.py")],
    "megatron_text_generation_server.sh": [({}, "tools/run_text_generation_server.py")],
}
# Records argv (program name first) of every python/torchrun the script starts.
STUB = """#!/bin/sh
{ printf '%s\\037' "$(basename "$0")" "$@"; printf '\\036'; } >> "$STUB_LOG"
"""
# SLURM is not installed here: this srun skips its options and runs the command, once.
FAKE_SRUN = """#!/bin/sh
while [ "${1#-}" != "$1" ]; do shift; done
exec "$@"
"""
OUR_LINES = re.compile(r"^[ \t]*(# mindspeed-prof adapt-script:.*|PROFILE_ARGS=.*)\n", re.M)
OUR_INLINE = re.compile(r"PROFILE_ARGS=\([^)]*\); ")


def fixture_text(name):
    return (FIXTURES / name).read_text()


def without_our_text(adapted):
    """The adapted text with every piece adapt-script adds taken out again."""
    text = OUR_LINES.sub("", adapted)
    text = OUR_INLINE.sub("", text)
    text = text.replace(" ".join(LAUNCHER) + " ", "")
    return text.replace(" " + ARRAY_REF, "").replace(" " + STRING_REF, "")


def run_with_stubs(tmp_path, script_text, env, shell="bash"):
    """Run a script with recording stand-ins for python/torchrun: the argv lists they got."""
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir(exist_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    (work / "logs").mkdir(parents=True)
    for program, text in (("python", STUB), ("python3", STUB), ("torchrun", STUB),
                          ("pip", STUB), ("srun", FAKE_SRUN)):
        (bin_dir / program).write_text(text)
        (bin_dir / program).chmod(0o755)
    script, log = work / "run.sh", tmp_path / "argv.log"
    script.write_text(script_text)
    log.write_text("")
    full_env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_LOG": str(log), **env}
    done = subprocess.run([shell, str(script)], cwd=work, env=full_env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [record.split("\037")[:-1] for record in log.read_text().split("\036")[:-1]]


def shell_of(text):
    return "sh" if text.startswith("#!/bin/sh") else "bash"


@pytest.mark.parametrize("name", sorted(ADAPTABLE))
def test_adapted_fixture_passes_bash_n(name, tmp_path):
    adapted = adapt_script(fixture_text(name), FLAGS).text
    (tmp_path / name).write_text(adapted)
    done = subprocess.run(["bash", "-n", str(tmp_path / name)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", sorted(ADAPTABLE))
def test_adaptation_only_inserts_our_text(name):
    original = fixture_text(name)
    adapted = adapt_script(original, FLAGS).text
    assert adapted != original
    assert without_our_text(adapted) == original


@pytest.mark.parametrize("name", sorted(ADAPTABLE))
def test_adapting_an_adapted_script_changes_nothing(name):
    once = adapt_script(fixture_text(name), FLAGS)
    twice = adapt_script(once.text, FLAGS)
    assert not twice.changed
    assert twice.text == once.text


@pytest.mark.parametrize("name,env,entry", [(name, env, entry)
                                            for name, runs in sorted(ADAPTABLE.items())
                                            for env, entry in runs])
def test_training_command_gets_launcher_and_flags_once_and_nothing_else_changes(
        name, env, entry, tmp_path):
    original = fixture_text(name)
    shell = shell_of(original)
    before = run_with_stubs(tmp_path, original, env, shell)
    after = run_with_stubs(tmp_path, adapt_script(original, FLAGS).text, env, shell)
    assert len(after) == len(before)
    trained = [argv for argv in after if "mindspeed_prof.launch" in argv]
    assert len(trained) == 1, after
    argv = trained[0]
    at = argv.index("mindspeed_prof.launch")
    assert argv[at - 1] == "-m" and argv[at + 1].endswith(entry)
    for flag in ("--profile", "--profile-step-start", "--profile-ranks"):
        assert argv.count(flag) == 1
    flags_at = argv.index("--profile")  # a string extended later (CMD+=...) puts them mid-way
    assert argv[flags_at:flags_at + len(FLAGS)] == FLAGS
    plain = argv[:flags_at] + argv[flags_at + len(FLAGS):]
    restored = [plain[:at - 1] + plain[at + 1:] if a is argv else a for a in after]
    assert restored == before


def test_flag_values_with_spaces_reach_the_command_as_one_argument(tmp_path):
    flags = FLAGS + ["--profile-save-path", "/tmp/profile out/run 1"]
    adapted = adapt_script(fixture_text("megatron_gpt_arrays.sh"), flags).text
    (argv,) = run_with_stubs(tmp_path, adapted, {})
    assert argv[-2:] == ["--profile-save-path", "/tmp/profile out/run 1"]


@settings(max_examples=30, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1))
def test_any_flag_value_survives_the_array_definition(value):
    adapted = adapt_script("torchrun pretrain_gpt.py\n", ["--profile-save-path", value]).text
    definition = adapted[adapted.index("PROFILE_ARGS=("):adapted.index("\ntorchrun")]
    assert adapt_script(adapted, ["--profile-save-path", value]).text == adapted
    done = subprocess.run(["bash", "-c", definition + '\nprintf "%s\\0" "${PROFILE_ARGS[@]}"'],
                          capture_output=True, timeout=30)
    assert done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1] == [
        "--profile-save-path", value]


def test_posix_sh_script_gets_a_string_variable_not_an_array():
    adapted = adapt_script(fixture_text("posix_sh.sh"), FLAGS).text
    assert 'PROFILE_ARGS="--profile --profile-step-start 3' in adapted
    assert adapted.count(STRING_REF) == 1 and ARRAY_REF not in adapted


def test_posix_sh_script_refuses_a_value_a_string_cannot_carry():
    with pytest.raises(ConfigError, match="POSIX sh"):
        adapt_script(fixture_text("posix_sh.sh"), FLAGS + ["--profile-save-path", "a b"])


def test_readapting_with_other_flags_replaces_only_the_definition():
    once = adapt_script(fixture_text("nodes_if_else.sh"), FLAGS)
    other = FLAGS[:-1] + ["0"]
    again = adapt_script(once.text, other)
    assert again.changed
    changed = [pair for pair in zip(once.text.splitlines(), again.text.splitlines())
               if pair[0] != pair[1]]
    assert len(changed) == 2 and all("PROFILE_ARGS=(" in old for old, _ in changed)
    assert any("was (--profile" in note for note in again.notes)
    assert len(again.text) == len(once.text)


def test_commands_in_comments_heredocs_and_strings_are_left_alone():
    adapted = adapt_script(fixture_text("case_models_python.sh"), FLAGS).text
    assert adapted.count("-m mindspeed_prof.launch") == 2
    for untouched in ("This job was once launched as: torchrun --nproc_per_node 8 pretrain_gpt.py",
                      'echo "use torchrun pretrain_gpt.py for multi-GPU runs"',
                      "# torchrun --nproc_per_node 8 pretrain_gpt.py $GPT_ARGS"):
        assert untouched + "\n" in adapted


def test_command_inside_a_case_arm_line_gets_its_definition_inline():
    adapted = adapt_script(fixture_text("case_models_python.sh"), FLAGS).text
    assert ("    bert) PROFILE_ARGS=(--profile --profile-step-start 3 --profile-step-end 5 "
            "--profile-ranks 1); exec python -m mindspeed_prof.launch pretrain_bert.py" in adapted)


def test_preprocessing_and_conversion_commands_are_not_adapted():
    adapted = adapt_script(fixture_text("pipeline_preprocess_convert_train.sh"), FLAGS)
    assert [launch.script_name for launch in adapted.launches] == ["pretrain_gpt.py"]
    assert "python ./preprocess_data.py \\\n" in adapted.text
    assert "python3 convert_ckpt.py --model-type" in adapted.text


def test_unrecognizable_script_lists_every_launch_and_why_it_was_refused():
    with pytest.raises(ConfigError) as caught:
        adapt_script(fixture_text("unrecognizable.sh"), FLAGS)
    message = str(caught.value)
    assert message.startswith("no training command found")
    for expected in ("line 4: python tools/preprocess_data.py (looks like data preprocessing)",
                     "line 5: python convert_ckpt.py (looks like checkpoint conversion)",
                     "line 6: torchrun evaluation.py (looks like evaluation)",
                     "line 7: torchrun is in the string assigned to CMD, which the script never "
                     "runs as a command"):
        assert expected in message


def test_line_adapts_a_command_not_named_like_training():
    text = "#!/bin/bash\npython prepare.py\npython my_job.py --steps 10\n"
    with pytest.raises(ConfigError, match="line 3: python my_job.py"):
        adapt_script(text, FLAGS)
    adapted = adapt_script(text, FLAGS, lines=[3]).text
    assert "python -m mindspeed_prof.launch my_job.py --steps 10 " + ARRAY_REF in adapted
    assert "python prepare.py\n" in adapted


def test_line_on_a_continued_line_picks_that_command():
    adapted = adapt_script(fixture_text("nodes_if_else.sh"), FLAGS, lines=[15])
    assert [launch.line for launch in adapted.launches] == [15]
    assert adapted.text.count("-m mindspeed_prof.launch") == 1


def test_line_updates_one_of_several_adapted_commands():
    once = adapt_script(fixture_text("nodes_if_else.sh"), FLAGS)
    again = adapt_script(once.text, ["--profile"], lines=[19])  # line 15 of the original
    assert again.text.count("PROFILE_ARGS=(--profile)\n") == 1
    assert again.text.count("PROFILE_ARGS=(--profile --profile-step-start 3") == 1


def test_line_without_a_launch_is_an_error():
    with pytest.raises(ConfigError, match="no Python launch this tool can adapt is on line 2"):
        adapt_script(fixture_text("nodes_if_else.sh"), FLAGS, lines=[2])


def test_two_launches_none_named_like_training_ask_for_line():
    text = "torchrun --standalone job_a.py\ntorchrun --standalone job_b.py\n"
    with pytest.raises(ConfigError, match="choose with --line N"):
        adapt_script(text, FLAGS)


def test_script_passing_its_own_profile_args_is_refused_with_the_fix():
    text = ('PROFILE_ARGS="--profile --profile-step-start 5"\n'
            "torchrun --nproc_per_node 8 pretrain_gpt.py $GPT_ARGS $PROFILE_ARGS\n")
    with pytest.raises(ConfigError, match=r"line 2: the training command already passes "
                                          r"\$PROFILE_ARGS.*edit that variable"):
        adapt_script(text, FLAGS)


def test_script_defining_profile_args_for_something_else_is_refused():
    text = 'PROFILE_ARGS="--profile default"\ntorchrun pretrain_gpt.py\n'
    with pytest.raises(ConfigError, match="line 1 already sets PROFILE_ARGS"):
        adapt_script(text, FLAGS)


def test_command_already_under_the_launcher_only_gains_the_flags():
    text = "torchrun --nproc_per_node 2 -m mindspeed_prof.launch pretrain_gpt.py --x 1\n"
    adapted = adapt_script(text, FLAGS).text
    assert adapted.count("mindspeed_prof.launch") == 1
    assert adapted.endswith("-m mindspeed_prof.launch pretrain_gpt.py --x 1 " + ARRAY_REF + "\n")


def test_profile_flags_already_in_an_argument_group_are_noted():
    text = 'GPT_ARGS="--num-layers 2 --profile-step-start 9"\ntorchrun pretrain_gpt.py $GPT_ARGS\n'
    notes = adapt_script(text, FLAGS).notes
    assert any("$GPT_ARGS already passes --profile-step-start" in note for note in notes)


@pytest.mark.parametrize("command,expected", [
    ("python -u -W ignore pretrain_gpt.py --a 1",
     "python -u -W ignore -m mindspeed_prof.launch pretrain_gpt.py --a 1"),
    ("torchrun --nproc_per_node 8 --rdzv-id job7 --standalone pretrain_gpt.py",
     "torchrun --nproc_per_node 8 --rdzv-id job7 --standalone -m mindspeed_prof.launch "
     "pretrain_gpt.py"),
    ("python3 -m torch.distributed.run --nnodes=1 $OPTS train.py",
     "python3 -m torch.distributed.run --nnodes=1 $OPTS -m mindspeed_prof.launch train.py"),
    ("exec env CUDA_VISIBLE_DEVICES=0 time torchrun --standalone ${MEGATRON}/pretrain_gpt.py",
     "exec env CUDA_VISIBLE_DEVICES=0 time torchrun --standalone -m mindspeed_prof.launch "
     "${MEGATRON}/pretrain_gpt.py"),
    ('ENTRY=pretrain_gpt.py\n$VENV_PREFIX "${NSYS[@]}" python -m torch.distributed.run "$ENTRY"',
     '$VENV_PREFIX "${NSYS[@]}" python -m torch.distributed.run -m mindspeed_prof.launch "$ENTRY"'),
    ("uv run --extra gpu numactl --cpunodebind=0 torchrun --standalone pretrain_gpt.py",
     "uv run --extra gpu numactl --cpunodebind=0 torchrun --standalone -m mindspeed_prof.launch "
     "pretrain_gpt.py"),
    ("$PYTHON_BIN -u pretrain_gpt.py", "$PYTHON_BIN -u -m mindspeed_prof.launch pretrain_gpt.py"),
    ("timeout 3600 torchrun --standalone pretrain_gpt.py",
     "timeout 3600 torchrun --standalone -m mindspeed_prof.launch pretrain_gpt.py"),
    ("timeout -k 30s --signal=TERM 2h setsid -w torchrun pretrain_gpt.py",
     "timeout -k 30s --signal=TERM 2h setsid -w torchrun -m mindspeed_prof.launch pretrain_gpt.py"),
    ("setsid nohup torchrun --nproc_per_node 2 pretrain_gpt.py",
     "setsid nohup torchrun --nproc_per_node 2 -m mindspeed_prof.launch pretrain_gpt.py"),
    ("srun -N 2 --ntasks-per-node=1 --container-image nvcr.io#nvidia/pytorch torchrun "
     "--nproc_per_node 8 pretrain_gpt.py",
     "srun -N 2 --ntasks-per-node=1 --container-image nvcr.io#nvidia/pytorch torchrun "
     "--nproc_per_node 8 -m mindspeed_prof.launch pretrain_gpt.py"),
    ("srun -l --mpi=pmix python -u ${MEGATRON}/pretrain_gpt.py --x 1",
     "srun -l --mpi=pmix python -u -m mindspeed_prof.launch ${MEGATRON}/pretrain_gpt.py --x 1"),
    ("mpirun -np 8 -x MASTER_ADDR python3 pretrain_gpt.py",
     "mpirun -np 8 -x MASTER_ADDR python3 -m mindspeed_prof.launch pretrain_gpt.py"),
])
def test_launcher_goes_right_before_the_training_script(command, expected):
    assert adapt_script(command + "\n", FLAGS).text.splitlines()[-1].startswith(expected)


def test_python_started_by_srun_counts_as_distributed():
    (launch,) = find_launches("srun --ntasks-per-node=8 python my_job.py\n")
    assert launch.verdict == "launcher only" and launch.script is not None


@pytest.mark.parametrize("text,expected", [
    ("LOG=$(torchrun --standalone pretrain_gpt.py 2>&1)\n",
     "LOG=$(PROFILE_ARGS=(--profile --profile-step-start 3 --profile-step-end 5 --profile-ranks 1)"
     '; torchrun --standalone -m mindspeed_prof.launch pretrain_gpt.py "${PROFILE_ARGS[@]}" 2>&1)'
     "\n"),
    ('echo "done: `python pretrain_gpt.py --x 1`"\n',
     'echo "done: `PROFILE_ARGS=(--profile --profile-step-start 3 --profile-step-end 5 '
     '--profile-ranks 1); python -m mindspeed_prof.launch pretrain_gpt.py --x 1 '
     '"${PROFILE_ARGS[@]}"`"\n'),
])
def test_command_in_a_substitution_is_adapted_inside_it(text, expected, tmp_path):
    adapted = adapt_script(text, FLAGS).text
    assert adapted == expected
    assert adapt_script(adapted, FLAGS).text == adapted
    (argv,) = run_with_stubs(tmp_path, adapted, {})
    assert argv[-len(FLAGS):] == FLAGS and "mindspeed_prof.launch" in argv


HELD = 'ARGS="--num-layers 2"\nCMD="python -u pretrain_gpt.py ${ARGS}"\n'
HELD_ADAPTED = ("# mindspeed-prof adapt-script: the --profile* flags of the training command "
                'below.\nPROFILE_ARGS="--profile --profile-step-start 3 --profile-step-end 5 '
                '--profile-ranks 1"\nCMD="python -u -m mindspeed_prof.launch pretrain_gpt.py '
                '${ARGS} $PROFILE_ARGS"\n')


@pytest.mark.parametrize("runner", [
    'srun -l --output=logs/%x_%j.log sh -c "${CMD}"', 'bash -c "$CMD"', 'bash -ec "$CMD"',
    'eval "$CMD"', "eval $CMD", "$CMD", "srun --ntasks=2 ${CMD}", "timeout 60 sh -c \"$CMD\""])
def test_command_string_run_later_is_adapted_in_its_assignment(runner, tmp_path):
    text = HELD + runner + "\n"
    adapted = adapt_script(text, FLAGS)
    assert adapted.text == 'ARGS="--num-layers 2"\n' + HELD_ADAPTED + runner + "\n"
    assert adapt_script(adapted.text, FLAGS).text == adapted.text
    (argv,) = run_with_stubs(tmp_path, adapted.text, {})
    assert argv == ["python", "-u", "-m", "mindspeed_prof.launch", "pretrain_gpt.py",
                    "--num-layers", "2"] + FLAGS


def test_command_string_handed_to_a_shell_in_a_container_is_adapted_but_an_echo_is_not():
    text = 'export CMD="torchrun pretrain_gpt.py"\ndocker exec -w /ws ctr bash -c "$CMD"\n'
    adapted = adapt_script(text, FLAGS).text
    assert 'export CMD="torchrun -m mindspeed_prof.launch pretrain_gpt.py $PROFILE_ARGS"' in adapted
    with pytest.raises(ConfigError, match="is in the string assigned to CMD, which the script "
                                          "never runs as a command"):
        adapt_script(text.replace("docker exec -w /ws ctr", "echo"), FLAGS)


def test_module_run_from_a_string_is_listed_with_its_reason():
    text = 'CMD="python -m examples.gpt_${ENGINE}_inference"\neval ${CMD}\n'
    with pytest.raises(ConfigError) as caught:
        adapt_script(text, FLAGS)
    assert ("line 1: python -m examples.gpt_…_inference (runs a module, not a training script; "
            "in a string run by eval on line 2)") in str(caught.value)


def test_flags_go_before_a_redirection_inside_the_string():
    text = 'CMD="python pretrain_gpt.py --x 1 2>&1 | tee train.log"\neval "$CMD"\n'
    assert adapt_script(text, FLAGS).text.endswith(
        'CMD="python -m mindspeed_prof.launch pretrain_gpt.py --x 1 $PROFILE_ARGS 2>&1 | tee '
        'train.log"\neval "$CMD"\n')


def test_command_string_written_where_it_runs_is_adapted_there(tmp_path):
    text = 'srun --ntasks=1 bash -c "cd . && torchrun --standalone pretrain_gpt.py --x 1"\n'
    adapted = adapt_script(text, FLAGS).text
    assert adapted.endswith('srun --ntasks=1 bash -c "cd . && torchrun --standalone -m '
                            'mindspeed_prof.launch pretrain_gpt.py --x 1 $PROFILE_ARGS"\n')
    (argv,) = run_with_stubs(tmp_path, adapted, {})
    assert argv[-len(FLAGS):] == FLAGS


@pytest.mark.parametrize("name", ["slurm_run_cmd.sh", "eval_cmd_substitution.sh"])
def test_flag_values_with_spaces_reach_a_command_run_from_a_string(name, tmp_path):
    flags = FLAGS + ["--profile-save-path", "/tmp/it's out/run 1"]
    adapted = adapt_script(fixture_text(name), flags).text
    (argv,) = run_with_stubs(tmp_path, adapted, {})
    assert argv[argv.index("--profile-save-path") + 1] == "/tmp/it's out/run 1"


def test_single_quoted_string_run_by_eval_gets_the_array(tmp_path):
    text = "ARGS=\"--x 1\"\nCMD='python pretrain_gpt.py $ARGS'\neval \"$CMD\"\n"
    adapted = adapt_script(text, FLAGS + ["--profile-save-path", "a b"]).text
    assert "CMD='python -m mindspeed_prof.launch pretrain_gpt.py $ARGS \"${PROFILE_ARGS[@]}\"'" \
        in adapted
    (argv,) = run_with_stubs(tmp_path, adapted, {})
    assert argv[-2:] == ["--profile-save-path", "a b"]


def test_single_quoted_string_run_in_a_new_shell_is_refused_with_the_reason():
    text = "CMD='python -u pretrain_gpt.py --x 1'\nsrun -l sh -c \"$CMD\"\n"
    with pytest.raises(ConfigError) as caught:
        adapt_script(text, FLAGS)
    message = str(caught.value)
    assert message.startswith("the training command cannot be adapted where it is written")
    assert "--line N" in message
    assert ("line 1: python pretrain_gpt.py (training entry, but in single quotes, and run where "
            "a variable of this script arrives unexpanded; write that string in double quotes; "
            "in a string run by sh -c on line 2)") in message


def test_string_run_as_a_bare_expansion_refuses_a_value_it_cannot_carry():
    text = 'CMD="torchrun pretrain_gpt.py"\n$CMD\n'
    with pytest.raises(ConfigError, match=r"'a b' cannot be passed through a string run by \$CMD "
                                          r"on line 2, which splits words but removes no quotes"):
        adapt_script(text, FLAGS + ["--profile-save-path", "a b"])


def test_crlf_script_keeps_crlf_endings_on_inserted_lines():
    lf = ('#!/bin/bash\nARGS="--x 1"\ncat <<EOF\ntorchrun pretrain_old.py\nEOF\n'
          'torchrun --standalone pretrain_gpt.py \\\n    $ARGS\nCMD="python pretrain_bert.py"\n'
          'sh -c "$CMD"\n')
    crlf = lf.replace("\n", "\r\n")
    adapted = adapt_script(crlf, FLAGS).text
    assert adapted.count("\n") == adapted.count("\r\n")
    assert adapted.replace("\r\n", "\n") == adapt_script(lf, FLAGS).text
    assert '    $ARGS "${PROFILE_ARGS[@]}"\r\n' in adapted
    assert 'CMD="python -m mindspeed_prof.launch pretrain_bert.py $PROFILE_ARGS"\r\n' in adapted


@pytest.mark.parametrize("command", [
    "torchrun $DISTRIBUTED_ARGS inference.py --max-new-tokens 16",
    "torchrun --nproc_per_node 2 ${MEGATRON}/tools/run_text_generation_server.py --port 5000",
    "python -u examples/inference/gpt/gpt_static_inference.py --prompts hi",
])
def test_inference_entries_are_adapted_and_say_the_window_counts_requests(command):
    adapted = adapt_script(command + "\n", FLAGS)
    (launch,) = adapted.launches
    assert launch.verdict == "inference"
    assert "-m mindspeed_prof.launch " in adapted.text
    assert "the inference command below" in adapted.text
    assert any("count requests" in note for note in adapted.notes)


def test_train_then_generate_script_adapts_training_and_names_the_inference_command():
    text = ("torchrun --standalone pretrain_gpt.py --save ckpt\n"
            "torchrun --standalone inference.py --load ckpt\n")
    adapted = adapt_script(text, FLAGS)
    assert [launch.line for launch in adapted.launches] == [1]
    assert "torchrun --standalone inference.py --load ckpt\n" in adapted.text
    assert ("line 2: the inference entry inference.py was not adapted; --line 2 adapts it"
            in adapted.notes)


@pytest.mark.parametrize("text,reason", [
    ('sbatch --wrap "torchrun pretrain_gpt.py"\n',
     "line 1: torchrun is in an argument of sbatch, which adapt-script does not follow"),
    ("# launch: torchrun pretrain_gpt.py\n",
     "line 1: torchrun appears only in a comment or heredoc, which the script does not run"),
    ('CMD="torchrun pretrain_gpt.py"\necho "$CMD"\n',
     "line 1: torchrun is in the string assigned to CMD, which the script never runs"),
])
def test_launch_words_adapt_script_cannot_reach_get_the_real_reason(text, reason):
    with pytest.raises(ConfigError, match="no training command found") as caught:
        adapt_script(text, FLAGS)
    assert reason in str(caught.value)


@pytest.mark.parametrize("command", [
    'torchrun --standalone "$MEGATRON_PATH/pretrain_gpt.py" --x',
    "${CONDA_PREFIX}/bin/python3 ${ROOT}/posttrain_gpt.py",
    "ENTRY=train_llama.py\ntorchrun $DISTRIBUTED_ARGS $ENTRY",
])
def test_paths_built_from_variables_are_recognised_as_training(command):
    (launch,) = find_launches(command + "\n")
    assert (launch.verdict, launch.reason) == ("training", "training entry")


@pytest.mark.parametrize("command,reason", [
    ("torchrun --no-python pretrain.sh", "--no-python"),
    ("torchrun --standalone -m megatron.pretrain_gpt", "-m runs a module"),
    ("python -c 'import train'", "-c program"),
    ("deepspeed pretrain_gpt.py", "deepspeed is not a launcher adapt-script edits"),
])
def test_launches_that_cannot_be_wrapped_say_why(command, reason):
    (launch,) = find_launches(command + "\n")
    assert reason in launch.reason and launch.script is None


def test_scanner_skips_heredoc_bodies_and_comments():
    text = "cat <<-'END'\n\ttorchrun x.py\n\tEND\n# torchrun y.py\necho ok # torchrun\n"
    assert [[w.text for w in c.words] for c in scan(text)] == [["cat"], ["echo", "ok"]]


def test_scanner_does_not_take_an_arithmetic_shift_for_a_heredoc():
    text = "(( mask = 1 << 3 ))\ntorchrun pretrain_gpt.py\n"
    assert [c.words[0].text for c in scan(text)] == ["(( mask = 1 << 3 ))", "torchrun"]


def test_command_in_a_brace_group_after_and_is_adapted(tmp_path):
    text = "mkdir -p logs && { torchrun --standalone pretrain_gpt.py; } | tee logs/t.log\n"
    adapted = adapt_script(text, FLAGS).text
    assert adapted.endswith("mkdir -p logs && { torchrun --standalone -m mindspeed_prof.launch "
                            "pretrain_gpt.py " + ARRAY_REF + "; } | tee logs/t.log\n")
    assert without_our_text(adapted) == text


def test_scanner_keeps_an_array_with_comments_as_one_word():
    (command,) = scan("ARGS=(\n  --a 1 # first (one)\n  --b\n)\n")
    assert command.words[0].text.endswith("--b\n)")


def test_dequote_marks_expansions_and_removes_quotes():
    assert dequote("\"${ROOT}\"/'pre train'.py") == "\0/pre train.py"


def test_torchrun_option_tables_match_the_installed_torch():
    run = pytest.importorskip("torch.distributed.run")
    from mindspeed_prof.script.launches import TORCHRUN_FLAGS, TORCHRUN_VALUED
    for action in run.get_args_parser()._actions:
        for option in action.option_strings:
            assert option in (TORCHRUN_FLAGS if action.nargs == 0 else TORCHRUN_VALUED), option


EXAMPLES = Path(__file__).resolve().parents[2] / "scripts" / "examples"
EXAMPLE_FLAGS = {  # the commands scripts/examples/README.md shows
    "megatron_lm/pretrain_gpt.sh": ["--profile", "--profile-step-start", "5",
                                    "--profile-step-end", "7", "--profile-ranks", "0"],
    "mindspeed_llm/pretrain_llama2_7b_ptd.sh": [
        "--profile", "--profile-step-start", "10", "--profile-step-end", "12", "--profile-ranks",
        "0", "--profile-level", "level1", "--profile-with-cpu", "--profile-save-path",
        "./profile_llama2_7b"],
}


@pytest.mark.parametrize("name", sorted(EXAMPLE_FLAGS))
def test_committed_example_copies_are_exactly_what_the_tool_writes(name):
    original = EXAMPLES / name
    copy = original.with_name(original.stem + "_profile.sh")
    assert adapt_script(original.read_text(), EXAMPLE_FLAGS[name]).text == copy.read_text()
