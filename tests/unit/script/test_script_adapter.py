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

FIXTURES = Path(__file__).resolve().parents[2] / "data" / "launch_scripts"
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
    "slurm_sh_c_tee.sh": [({}, "pretrain_gpt.py")],
    "eval_extra_args.sh": [({}, "pretrain_gpt.py")],
    "bash_heredoc.sh": [({}, "pretrain_gpt.py"), ({"NPROC": "2"}, "pretrain_gpt.py")],
    "sbatch_heredoc_training_cmd.sh": [({}, "pretrain_gpt.py"),
                                       ({"MEGATRON_PATH": "/opt/megatron"}, "pretrain_gpt.py")],
    "sbatch_quoted_heredoc.sh": [({}, "pretrain_gpt.py")],
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
# ... and this sbatch runs the batch script at once and waits for it (as `sbatch --wait` does),
# with the interpreter its #! line names, reading it from stdin unless a file is given;
# --wrap "CMD" runs CMD under sh, as sbatch's generated script does.
FAKE_SBATCH = """#!/bin/sh
wrap=""
while [ $# -gt 0 ]; do
    case "$1" in
        --wrap=*) wrap=${1#--wrap=} ;;
        --wrap) shift; wrap=$1 ;;
        -?) shift ;;  # -N 2, -p part: a short option takes a value
        -*) ;;
        *) break ;;
    esac
    shift
done
[ -n "$wrap" ] && exec sh -c "$wrap"
script=$(mktemp)
cat "${1:--}" > "$script"
interpreter=$(sed -n '1s/^#!//p' "$script")
${interpreter:?the batch script has no #! line} "$script"
status=$?
rm -f "$script"
exit $status
"""
# ... and this ssh runs its command here, as the remote login shell would, stdin included.
FAKE_SSH = """#!/bin/sh
shift
exec sh -c "$*"
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
                          ("pip", STUB), ("srun", FAKE_SRUN), ("sbatch", FAKE_SBATCH),
                          ("ssh", FAKE_SSH)):
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
                     "line 7: torchrun is in the string assigned to CMD, which is only printed "
                     "(echo on line 8), never run"):
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
    with pytest.raises(ConfigError, match=r"is in the string assigned to CMD, which is only "
                                          r"printed \(echo on line 2\), never run"):
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
    ('ssh node1 "torchrun pretrain_gpt.py"\n',
     "line 1: torchrun is in an argument of ssh, which adapt-script does not follow"),
    ("# launch: torchrun pretrain_gpt.py\n",
     "line 1: torchrun appears only in a comment, which the script does not run"),
    ("cat > job.txt <<EOF\ntorchrun pretrain_gpt.py\nEOF\n",
     "line 2: torchrun is in a heredoc given to cat on line 1, which reads it as data, not as a "
     "script"),
    ('CMD="torchrun pretrain_gpt.py"\necho "$CMD"\n',
     "line 1: torchrun is in the string assigned to CMD, which is only printed (echo on line 2)"),
    ('CMD="torchrun pretrain_gpt.py"\nparallel -j 2 ::: "$CMD"\n',
     "line 1: torchrun is in the string assigned to CMD, which is passed to parallel on line 2"),
    ('CMD="torchrun pretrain_gpt.py"\n',
     "line 1: torchrun is in the string assigned to CMD, which the script never runs"),
    ("bash <<EOF\necho 'unended\ntorchrun pretrain_gpt.py\nEOF\n",
     "line 3: torchrun is in a heredoc run by bash <<EOF on line 1, whose shell syntax "
     "adapt-script cannot follow"),
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


EXAMPLES = Path(__file__).resolve().parents[3] / "scripts" / "examples"
EXAMPLE_FLAGS = {  # the commands scripts/examples/README.md shows
    "megatron_lm/pretrain_gpt.sh": ["--profile", "--profile-step-start", "5",
                                    "--profile-step-end", "7", "--profile-ranks", "0"],
    "mindspeed_llm/pretrain_llama2_7b_ptd.sh": [
        "--profile", "--profile-step-start", "10", "--profile-step-end", "12", "--profile-ranks",
        "0", "--profile-level", "level1", "--profile-with-cpu", "--profile-save-path",
        "./profile_llama2_7b"],
    "megatron_lm/sbatch_pretrain_gpt.sh": ["--profile", "--profile-step-start", "10",
                                           "--profile-step-end", "12", "--profile-ranks", "0"],
}


@pytest.mark.parametrize("name", sorted(EXAMPLE_FLAGS))
def test_committed_example_copies_are_exactly_what_the_tool_writes(name):
    original = EXAMPLES / name
    copy = original.with_name(original.stem + "_profile.sh")
    assert adapt_script(original.read_text(), EXAMPLE_FLAGS[name]).text == copy.read_text()


# ---- text pasted into other text, heredocs read as scripts ---------------------------------------

PASTED = 'CMD="python -u pretrain_gpt.py --num-layers 2"\n'
PASTED_ADAPTED = ("# mindspeed-prof adapt-script: the --profile* flags of the training command "
                  'below.\nPROFILE_ARGS="--profile --profile-step-start 3 --profile-step-end 5 '
                  '--profile-ranks 1"\nCMD="python -u -m mindspeed_prof.launch pretrain_gpt.py '
                  '--num-layers 2 $PROFILE_ARGS"\n')


@pytest.mark.parametrize("runner,extra", [
    ('srun -l sh -c "${CMD} 2>&1 | tee logs/train.log"', []),
    ('eval "${CMD} --seed 7"', ["--seed", "7"]),
    ('bash -c "cd . && ${CMD} --seed 7 | tee logs/train.log"', ["--seed", "7"]),
    ("bash <<EOF\n${CMD} 2>&1 | tee logs/train.log\nEOF", []),
    ("sbatch <<EOF\n#!/bin/bash\nsrun ${CMD} --seed 7\nEOF", ["--seed", "7"]),
    ('bash <<< "$CMD"', []),
    ("ssh node1 bash -s <<EOF\ncd .\n${CMD} --seed 7\nEOF", ["--seed", "7"]),
])
def test_command_string_pasted_into_text_that_runs_is_adapted_in_its_assignment(
        runner, extra, tmp_path):
    adapted = adapt_script(PASTED + runner + "\n", FLAGS)
    assert adapted.text == PASTED_ADAPTED + runner + "\n"
    assert adapt_script(adapted.text, FLAGS).text == adapted.text
    (argv,) = run_with_stubs(tmp_path, adapted.text, {})
    assert argv == ["python", "-u", "-m", "mindspeed_prof.launch", "pretrain_gpt.py",
                    "--num-layers", "2"] + FLAGS + extra


def test_launch_in_a_heredoc_read_by_bash_gets_flags_the_outer_shell_pastes(tmp_path):
    text = ("#!/bin/bash\nbash <<EOF\ncd .\nexec torchrun --standalone pretrain_gpt.py \\\n"
            "    --num-layers 2 2>&1 | tee logs/train.log\nEOF\n")
    adapted = adapt_script(text, FLAGS).text
    assert adapted == (
        "#!/bin/bash\n# mindspeed-prof adapt-script: the --profile* flags of the training "
        'command below.\nPROFILE_ARGS="--profile --profile-step-start 3 --profile-step-end 5 '
        '--profile-ranks 1"\nbash <<EOF\ncd .\nexec torchrun --standalone -m mindspeed_prof.launch'
        " pretrain_gpt.py \\\n    --num-layers 2 $PROFILE_ARGS 2>&1 | tee logs/train.log\nEOF\n")
    (argv,) = run_with_stubs(tmp_path, adapted, {})
    assert argv[-len(FLAGS):] == FLAGS


@pytest.mark.parametrize("reader,definition,ref", [
    ("bash", "PROFILE_ARGS=(--profile --profile-step-start 3 --profile-step-end 5 "
             "--profile-ranks 1)", ARRAY_REF),
    ("sh", 'PROFILE_ARGS="--profile --profile-step-start 3 --profile-step-end 5 --profile-ranks 1"',
     STRING_REF),
])
def test_heredoc_taken_as_written_gets_its_definition_inside_it(reader, definition, ref,
                                                                tmp_path):
    text = f"#!/bin/bash\n{reader} <<'EOF'\nset -e\ntorchrun --standalone pretrain_gpt.py --x 1\nEOF\n"
    adapted = adapt_script(text, FLAGS).text
    assert adapted == (f"#!/bin/bash\n{reader} <<'EOF'\nset -e\n# mindspeed-prof adapt-script: the "
                       f"--profile* flags of the training command below.\n{definition}\n"
                       f"torchrun --standalone -m mindspeed_prof.launch pretrain_gpt.py --x 1 "
                       f"{ref}\nEOF\n")
    assert adapt_script(adapted, FLAGS).text == adapted
    (argv,) = run_with_stubs(tmp_path, adapted, {})
    assert argv[-len(FLAGS):] == FLAGS


def test_heredoc_handed_to_a_remote_shell_taken_as_written_gets_its_definition_inside(
        tmp_path):
    text = "ssh node1 bash -s <<'EOF'\nARGS=(--x 1)\ntorchrun pretrain_gpt.py \"${ARGS[@]}\"\nEOF\n"
    adapted = adapt_script(text, FLAGS).text
    assert adapted.startswith("ssh node1 bash -s <<'EOF'\nARGS=(--x 1)\n# mindspeed-prof")
    (argv,) = run_with_stubs(tmp_path, adapted, {})
    assert argv == ["torchrun", "-m", "mindspeed_prof.launch", "pretrain_gpt.py", "--x",
                    "1"] + FLAGS


def test_posix_heredoc_reader_refusing_a_value_names_the_heredoc_not_the_shebang():
    text = "#!/bin/bash\nsh <<'EOF'\ntorchrun pretrain_gpt.py\nEOF\n"
    with pytest.raises(ConfigError, match=r"a POSIX sh string variable \(the heredoc is run by "
                                          r"sh <<'EOF' on line 2\)"):
        adapt_script(text, FLAGS + ["--profile-save-path", "a b"])


NASTY = ["--profile", "--profile-save-path", "/tmp/it's \"out\"/$HOME `x` \\ run 1"]


@pytest.mark.parametrize("name", ["sbatch_heredoc_training_cmd.sh", "bash_heredoc.sh",
                                  "slurm_sh_c_tee.sh", "eval_extra_args.sh",
                                  "sbatch_quoted_heredoc.sh"])
def test_any_flag_value_reaches_a_command_in_pasted_text_or_a_heredoc(name, tmp_path):
    adapted = adapt_script(fixture_text(name), NASTY).text
    (argv,) = run_with_stubs(tmp_path, adapted, {})
    assert argv[argv.index("--profile"):argv.index("--profile") + 3] == NASTY


@settings(max_examples=20, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1))
def test_any_value_survives_a_string_pasted_into_bash_c_inside_an_sbatch_heredoc(value):
    text = ('CMD="python pretrain_gpt.py"\nsbatch <<EOF\n#!/bin/bash\nbash -c "${CMD}"\nEOF\n')
    adapted = adapt_script(text, ["--profile-save-path", value]).text
    definition = adapted.splitlines()[1]
    job = adapted.replace("sbatch <<EOF", "bash <<EOF").replace("python ", "printf '%s\\0' ")
    done = subprocess.run(["bash", "-c", job], capture_output=True, timeout=30)
    assert definition.startswith("PROFILE_ARGS=")
    assert done.stdout.decode().split("\0")[:-1] == [
        "-m", "mindspeed_prof.launch", "pretrain_gpt.py", "--profile-save-path", value]


def test_megatron_sbatch_shape_edits_the_command_string_not_the_batch_script():
    adapted = adapt_script(fixture_text("sbatch_heredoc_training_cmd.sh"), FLAGS)
    (launch,) = adapted.launches
    assert launch.line == 28 and launch.held.where() == "bash -c on line 39"
    assert ('${NSYS_PREFIX} python -m mindspeed_prof.launch ${MEGATRON_PATH}/pretrain_gpt.py '
            '${TRAIN_ARGS[@]} $PROFILE_ARGS"\n') in adapted.text
    heredoc = adapted.text[adapted.text.index("sbatch <<EOF"):]
    assert heredoc == fixture_text("sbatch_heredoc_training_cmd.sh")[
        fixture_text("sbatch_heredoc_training_cmd.sh").index("sbatch <<EOF"):]


def test_line_picks_a_command_in_a_heredoc_not_named_like_training(tmp_path):
    text = "#!/bin/bash\nsbatch <<EOF\n#!/bin/bash\nsrun python my_job.py --steps 10\nEOF\n"
    with pytest.raises(ConfigError, match="no training command found"):
        adapt_script(text.replace("srun ", ""), FLAGS)
    adapted = adapt_script(text.replace("srun ", ""), FLAGS, lines=[4]).text
    assert "python -m mindspeed_prof.launch my_job.py --steps 10 $PROFILE_ARGS\n" in adapted
    (argv,) = run_with_stubs(tmp_path, adapted, {})
    assert argv[-len(FLAGS):] == FLAGS


@pytest.mark.parametrize("runner", ['sbatch -N 1 --wrap "torchrun pretrain_gpt.py --x 1"',
                                    'sbatch --wrap="torchrun pretrain_gpt.py --x 1"'])
def test_sbatch_wrap_string_is_adapted_where_it_is_written(runner, tmp_path):
    adapted = adapt_script(runner + "\n", FLAGS).text
    assert 'torchrun -m mindspeed_prof.launch pretrain_gpt.py --x 1 $PROFILE_ARGS"\n' in adapted
    (argv,) = run_with_stubs(tmp_path, adapted, {})
    assert argv == ["torchrun", "-m", "mindspeed_prof.launch", "pretrain_gpt.py", "--x",
                    "1"] + FLAGS


def test_single_quoted_string_inside_an_expanding_heredoc_gets_the_flags_pasted(tmp_path):
    text = "sbatch <<EOF\n#!/bin/bash\nsrun bash -c 'torchrun pretrain_gpt.py --x 1'\nEOF\n"
    adapted = adapt_script(text, FLAGS).text
    assert "bash -c 'torchrun -m mindspeed_prof.launch pretrain_gpt.py --x 1 $PROFILE_ARGS'" \
        in adapted
    (argv,) = run_with_stubs(tmp_path, adapted, {})
    assert argv[-len(FLAGS):] == FLAGS
    with pytest.raises(ConfigError, match=r"cannot be passed through a string run by bash -c on "
                                          r"line 3, which pastes it inside single quotes"):
        adapt_script(text, FLAGS + ["--profile-save-path", "it's"])


def test_crlf_heredoc_script_keeps_crlf_on_inserted_lines():
    lf = ('#!/bin/bash\nCMD="python pretrain_gpt.py"\nsbatch <<EOF\r\n#!/bin/bash\n'
          'bash -c "${CMD}"\nEOF\nbash <<\'EOF\'\ntorchrun pretrain_bert.py \\\n  --x 1\nEOF\n'
          ).replace("\r\n", "\n")
    crlf = lf.replace("\n", "\r\n")
    adapted = adapt_script(crlf, FLAGS).text
    assert adapted.count("\n") == adapted.count("\r\n") == lf.count("\n") + 4
    assert adapted.replace("\r\n", "\n") == adapt_script(lf, FLAGS).text
    assert '  --x 1 "${PROFILE_ARGS[@]}"\r\nEOF\r\n' in adapted


def test_a_heredoc_given_to_a_script_file_is_its_input_not_a_script():
    text = "bash train_wrapper.sh <<EOF\ntorchrun pretrain_gpt.py\nEOF\n"
    with pytest.raises(ConfigError) as caught:
        adapt_script(text, FLAGS)
    assert ("line 2: torchrun is in a heredoc given to bash train_wrapper.sh on line 1: that "
            "script reads it as its input, adapt-script does not open train_wrapper.sh"
            in str(caught.value))


def test_variable_set_inside_an_expanding_heredoc_is_named_as_not_followed():
    text = 'bash <<EOF\nCMD="torchrun pretrain_gpt.py"\neval "\\$CMD"\nEOF\n'
    with pytest.raises(ConfigError) as caught:
        adapt_script(text, FLAGS)
    assert ("line 2: torchrun is in the string assigned to CMD inside the heredoc run by bash "
            "<<EOF on line 1, which the outer shell expands first; adapt-script does not follow "
            "variables set there") in str(caught.value)


# ---- refusals carry the way by hand --------------------------------------------------------------

def test_refusal_of_a_single_quoted_string_says_what_to_write_inside_it(tmp_path):
    text = "CMD='python -u pretrain_gpt.py --x 1'\nsrun -l sh -c \"$CMD\"\n"
    flags = FLAGS + ["--profile-save-path", "it's here"]
    with pytest.raises(ConfigError) as caught:
        adapt_script(text, flags)
    message = str(caught.value)
    assert ("To add the flags by hand: on line 1, inside the string, write -m "
            "mindspeed_prof.launch right before pretrain_gpt.py and, after its last argument, "
            "the flags themselves") in message
    pasted = message.splitlines()[-1].strip()
    by_hand = text.replace("-u pretrain_gpt.py --x 1",
                           f"-u -m mindspeed_prof.launch pretrain_gpt.py --x 1 {pasted}")
    (argv,) = run_with_stubs(tmp_path, by_hand, {})
    assert argv[-len(flags):] == flags


def test_refusal_of_a_command_in_an_unfollowed_argument_gives_the_lines_to_paste(tmp_path):
    text = '#!/bin/bash\nmkdir -p logs\nssh node1 "torchrun pretrain_gpt.py --x 1"\n'
    with pytest.raises(ConfigError) as caught:
        adapt_script(text, FLAGS)
    lines = str(caught.value).splitlines()
    at = lines.index("To add the flags by hand, paste these two lines above the statement on "
                     "line 3:")
    assert lines[at + 1:at + 3] == [
        "    # mindspeed-prof adapt-script: the --profile* flags of the training command below.",
        "    PROFILE_ARGS=(--profile --profile-step-start 3 --profile-step-end 5 "
        "--profile-ranks 1)"]
    assert ('write -m mindspeed_prof.launch right before the training script and '
            '"${PROFILE_ARGS[@]}" after its last argument') in lines[at + 3]
    assert 'paste PROFILE_ARGS="--profile --profile-step-start 3 --profile-step-end 5 ' \
           '--profile-ranks 1" above that string instead and write $PROFILE_ARGS' in lines[at + 3]


def test_way_by_hand_for_a_string_passed_to_an_unknown_program_points_at_that_command():
    text = "PRETRAIN_EXE=./pretrain_gpt.py\n${RUNNER} ${PRETRAIN_EXE} --x 1\n"
    with pytest.raises(ConfigError) as caught:
        adapt_script(text, FLAGS)
    message = str(caught.value)
    assert ("line 1: pretrain_gpt.py is in the string assigned to PRETRAIN_EXE, which is passed "
            "to ${RUNNER} on line 2") in message
    assert "paste these two lines above the statement on line 2:" in message


def test_mentions_in_comments_and_printed_strings_get_no_way_by_hand():
    text = '# torchrun pretrain_gpt.py\nCMD="torchrun pretrain_gpt.py"\necho "$CMD"\n'
    with pytest.raises(ConfigError) as caught:
        adapt_script(text, FLAGS)
    assert "by hand" not in str(caught.value)


# ---- --use-pytorch-profiler ----------------------------------------------------------------------

HOST_PROFILED = """#!/bin/bash
GPT_ARGS=(
    --num-layers 2
    --use-pytorch-profiler
    --tensorboard-dir tb
)
LOG_ARGS="--log-interval 1 --use-pytorch-profiler"
torchrun --standalone pretrain_gpt.py "${GPT_ARGS[@]}" $LOG_ARGS --use-pytorch-profiler
"""


def test_script_passing_use_pytorch_profiler_is_refused_naming_each_place_and_the_fix():
    with pytest.raises(ConfigError) as caught:
        adapt_script(HOST_PROFILED, FLAGS)
    message = str(caught.value)
    assert message.startswith("line 8: the training command passes --use-pytorch-profiler "
                              "($GPT_ARGS on line 4, $LOG_ARGS on line 7, the command on line 8)")
    assert "refuses it at start-up" in message and "--drop-use-pytorch-profiler" in message


def test_drop_use_pytorch_profiler_leaves_it_out_of_every_place_and_nothing_else(tmp_path):
    adapted = adapt_script(HOST_PROFILED, FLAGS, drop_use_pytorch_profiler=True)
    assert "--use-pytorch-profiler" not in adapted.text
    expected = HOST_PROFILED.replace("    --use-pytorch-profiler\n", "").replace(
        " --use-pytorch-profiler", "")
    assert without_our_text(adapted.text) == expected
    assert [n for n in adapted.notes if "--use-pytorch-profiler" in n] == [
        "line 4: --use-pytorch-profiler (in GPT_ARGS) is left out of the copy; mindspeed_prof "
        "writes the trace",
        "line 7: --use-pytorch-profiler (in LOG_ARGS) is left out of the copy; mindspeed_prof "
        "writes the trace",
        "line 8: --use-pytorch-profiler is left out of the copy; mindspeed_prof writes the trace"]
    assert adapt_script(adapted.text, FLAGS).text == adapted.text
    (argv,) = run_with_stubs(tmp_path, adapted.text, {})
    assert "--use-pytorch-profiler" not in argv and argv[-len(FLAGS):] == FLAGS


def test_use_pytorch_profiler_in_a_command_string_and_an_extended_array_is_found():
    text = ('ARGS=(--num-layers 2)\nARGS=("${ARGS[@]}" --use-pytorch-profiler)\n'
            'options="--seed 1 \\\n    --use-pytorch-profiler \\\n    --lr 1"\n'
            'run_cmd="python pretrain_gpt.py ${ARGS[*]} ${options}"\nsrun sh -c "${run_cmd}"\n')
    with pytest.raises(ConfigError, match=r"\(\$ARGS on line 2, \$options on line 4\)"):
        adapt_script(text, FLAGS)
    adapted = adapt_script(text, FLAGS, drop_use_pytorch_profiler=True).text
    assert 'ARGS=("${ARGS[@]}")\noptions="--seed 1 \\\n \\\n    --lr 1"\n' in adapted


def test_use_pytorch_profiler_on_a_command_not_adapted_is_left_alone():
    text = ("torchrun --standalone pretrain_gpt.py --x 1\n"
            "torchrun --standalone evaluate_gpt.py --use-pytorch-profiler\n")
    adapted = adapt_script(text, FLAGS).text
    assert "evaluate_gpt.py --use-pytorch-profiler\n" in adapted


@pytest.mark.parametrize("command", [
    "torchrun --standalone pretrain_gpt.py \\\n    --x 1 \\\n    --use-pytorch-profiler\n",
    "torchrun --standalone pretrain_gpt.py \\\n    --use-pytorch-profiler \\\n    --x 1\n",
    "torchrun --standalone pretrain_gpt.py --x 1 --use-pytorch-profiler\n",
    "GPT_ARGS=(\r\n    --x 1\r\n    --use-pytorch-profiler\r\n)\r\n"
    'torchrun --standalone pretrain_gpt.py "${GPT_ARGS[@]}" \\\r\n    --use-pytorch-profiler\r\n',
])
def test_dropping_the_last_or_a_continued_word_keeps_the_command_whole(command, tmp_path):
    newline = "\r\n" if "\r\n" in command else "\n"
    text = command + "echo done" + newline
    adapted = adapt_script(text, FLAGS, drop_use_pytorch_profiler=True).text
    assert adapt_script(adapted, FLAGS).text == adapted
    assert adapted.count("\n") == adapted.count(newline)
    runnable = adapted.replace("\r\n", "\n").replace("echo done", "python done.py")
    argv, done = run_with_stubs(tmp_path, runnable, {})
    assert argv == ["torchrun", "--standalone", "-m", "mindspeed_prof.launch", "pretrain_gpt.py",
                    "--x", "1"] + FLAGS
    assert done == ["python", "done.py"]


def test_the_entry_script_of_an_adapted_command_is_not_taken_for_a_passed_option():
    text = 'ROOT=${ROOT:- --use-pytorch-profiler .}\ntorchrun --standalone ${ROOT}/pretrain_gpt.py\n'
    once = adapt_script(text, FLAGS)
    assert adapt_script(once.text, FLAGS).text == once.text
