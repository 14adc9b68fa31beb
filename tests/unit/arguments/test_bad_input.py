"""Bad input, generated: every invalid flag, YAML file or command argument is exit code 2 and one
message that names the flag or key and says what to do, never a traceback.

The flag and YAML cases go through ``mindspeed-prof show-config``, which resolves profile flags
exactly as training does (same argparse definitions, same YAML loader, same ProfilerConfig); two
subprocess tests check the real exit status and stderr, of the console script and of training.
"""

import os
import subprocess
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.launch import ENTRY_SCRIPT, STANDIN_DIR, default_args
from mindspeed_prof.config.profiler_config import KNOBS, flag_name
from helpers.usage import assert_usage_error, run_cli

# A message "says what to do" when it gives a value to use, a choice, an example or a bound.
# Words YAML reads as something other than text (true, no, null, ...) make no key or name.
YAML_WORDS = {"y", "n", "yes", "no", "true", "false", "on", "off", "null"}
LETTERS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12).filter(
    lambda s: s not in YAML_WORDS)


# -- invalid flags -------------------------------------------------------------------------------

INT_FLAGS = [flag_name(k) for k, f in KNOBS.items() if f.metadata["kind"].name == "int"]
NUMBER_FLAGS = [flag_name(k) for k, f in KNOBS.items() if f.metadata["kind"].name == "float?"]
CHOICE_KNOBS = {k: f.metadata["choices"] for k, f in KNOBS.items()
                if f.metadata["kind"].name in ("choice", "choice?")}


def not_an_int(text):
    try:
        int(text)
    except ValueError:
        return True
    return False


def not_a_number(text):
    try:
        float(text)
    except ValueError:
        return True
    return False


@st.composite
def non_integer_value(draw):
    flag = draw(st.sampled_from(INT_FLAGS))
    value = draw(st.one_of(LETTERS, st.floats(allow_nan=False, allow_infinity=False).map(
        lambda f: f"{f}.5"), st.sampled_from(["", "1e3", "0x10", "5 6", "ten"])).filter(
        not_an_int))
    return [f"{flag}={value}"], [flag]


@st.composite
def non_number_value(draw):
    flag = draw(st.sampled_from(NUMBER_FLAGS))
    value = draw(LETTERS.filter(not_a_number))
    return [f"{flag}={value}"], [flag]


# nan compares false with every bound; inf is no budget at all. Both spelled as Python and
# argparse's float() accept them.
NON_FINITE = st.sampled_from(["nan", "NaN", "inf", "Infinity", "-inf", "+inf"])


@st.composite
def out_of_range_number(draw):
    case = draw(st.sampled_from(["start", "end", "every", "poll", "gc", "max_gb", "factor",
                                 "capture_count"]))
    if case == "factor":
        flag = draw(st.sampled_from(["--profile-on-slow-step", "--profile-on-straggler"]))
        value = draw(st.floats(max_value=1.0, allow_nan=False, allow_infinity=False))
        return [f"{flag}={value}"], [flag]
    if case == "capture_count":
        flag, floor = draw(st.sampled_from([("--profile-capture-steps", 1),
                                            ("--profile-max-captures", 1),
                                            ("--profile-capture-warmup", 0),
                                            ("--profile-capture-cooldown", 0)]))
        return [f"{flag}={draw(st.integers(max_value=floor - 1))}"], [flag]
    if case == "start":
        value = draw(st.integers(max_value=0))
        return [f"--profile-step-start={value}"], ["--profile-step-start"]
    if case == "end":
        start = draw(st.integers(min_value=1, max_value=10**6))
        end = draw(st.integers(min_value=-10**6, max_value=start).filter(lambda e: e != -1))
        return ([f"--profile-step-start={start}", f"--profile-step-end={end}"],
                ["--profile-step-end"])
    if case == "every":
        return [f"--profile-every={draw(st.integers(max_value=-1))}"], ["--profile-every"]
    if case == "poll":
        value = draw(st.integers(max_value=0))
        return [f"--profile-trigger-poll={value}"], ["--profile-trigger-poll"]
    if case == "gc":
        value = draw(st.floats(max_value=-0.001, allow_nan=False, allow_infinity=False))
        return [f"--profile-gc-detect-threshold={value}"], ["--profile-gc-detect-threshold"]
    value = draw(st.one_of(st.floats(max_value=0, allow_nan=False, allow_infinity=False),
                           NON_FINITE))
    return [f"--profile-max-gb={value}"], ["--profile-max-gb"]


@st.composite
def non_finite_number(draw):
    flag = draw(st.sampled_from(NUMBER_FLAGS))
    return [f"{flag}={draw(NON_FINITE)}"], [flag]


@st.composite
def unknown_name(draw):
    knob = draw(st.sampled_from(sorted(CHOICE_KNOBS)))
    valid = {c.lower() for c in CHOICE_KNOBS[knob]}
    value = draw(LETTERS.filter(lambda v: v.lower() not in valid and v.lower() != "none"))
    return [f"{flag_name(knob)}={value}"], [flag_name(knob)]


@st.composite
def unknown_host_metric(draw):
    valid = set(KNOBS["profile_host_sys"].metadata["choices"])
    bad = draw(LETTERS.filter(lambda v: v.lower() not in valid))
    good = draw(st.lists(st.sampled_from(sorted(valid)), max_size=2))
    return ["--profile-host-sys", *good, bad], ["--profile-host-sys"]


@st.composite
def malformed_ranks(draw):
    word = LETTERS.filter(lambda w: w.lower() not in ("all", "none"))
    token = draw(st.one_of(
        word,                                                            # a name
        st.integers(max_value=-2).map(str),                              # negative rank
        st.tuples(st.integers(1, 999), st.integers(1, 999)).filter(       # backwards range
            lambda t: t[0] > t[1]).map(lambda t: f"{t[0]}-{t[1]}"),
        st.integers(0, 99).map(lambda r: f"{r}-"),                        # open range
        st.tuples(word, st.integers(0, 7)).filter(                        # unknown coordinate
            lambda t: t[0] not in ("tp", "pp", "dp", "cp", "ep", "node")).map(
            lambda t: f"{t[0]}={t[1]}"),
    ))
    good = draw(st.lists(st.integers(0, 63).map(str), max_size=2))
    return [f"--profile-ranks", *good, token], ["--profile-ranks"]


@st.composite
def list_naming_nothing(draw):
    """An unset $RANKS / $STEPS / $CONFIG in a launch script, or only separators: never "every
    rank", the default window or no file."""
    flag = draw(st.sampled_from(["--profile-ranks", "--profile-steps", "--profile-config"]))
    nothing = st.text(alphabet=", \t", max_size=4)
    if flag == "--profile-config":
        nothing = st.text(alphabet=" \t", max_size=3)
    argv = draw(st.one_of(
        nothing.map(lambda t: [f"{flag}={t}"]),
        st.lists(nothing, min_size=1, max_size=3 if flag != "--profile-config" else 1).map(
            lambda ts: [flag, *ts]),
    ))
    return argv, [flag]


@st.composite
def malformed_steps(draw):
    token = draw(st.one_of(
        LETTERS,
        st.tuples(st.integers(2, 999), st.integers(1, 998)).filter(
            lambda t: t[0] > t[1]).map(lambda t: f"{t[0]}-{t[1]}"),
        st.integers(1, 99).map(lambda a: f"{a}-{a + 5},{a + 2}-{a + 9}"),  # overlapping
    ))
    return [f"--profile-steps={token}"], ["--profile-steps"]


@st.composite
def unknown_flag(draw):
    real = [flag_name(k) for k in KNOBS]
    flag = draw(st.one_of(
        LETTERS.map(lambda s: f"--profile-{s.replace('_', '-')}"),
        # a typo: one character dropped from a real flag
        st.tuples(st.sampled_from(real), st.integers(3, 40)).map(
            lambda t: t[0][:t[1]] + t[0][t[1] + 1:]),
    ).filter(lambda f: f not in real and f.strip("-")))
    return [flag, "1"], [flag]


@st.composite
def switch_with_a_value(draw):
    switch = draw(st.sampled_from([flag_name(k) for k, f in KNOBS.items()
                                   if f.metadata["kind"].name == "bool"]))
    value = draw(st.sampled_from(["true", "yes", "1", "on", "False"]))
    return [switch, value], [switch]


@st.composite
def contradictory_flags(draw):
    start = draw(st.integers(1, 100))
    case = draw(st.sampled_from(["every-with-open-end", "every-shorter", "every-and-steps"]))
    if case == "every-with-open-end":
        return ([f"--profile-step-start={start}", "--profile-step-end=-1", "--profile-every=5"],
                ["--profile-every"])
    if case == "every-shorter":
        length = draw(st.integers(2, 50))
        every = draw(st.integers(1, length - 1))
        return ([f"--profile-step-start={start}", f"--profile-step-end={start + length}",
                 f"--profile-every={every}"], ["--profile-every"])
    return ["--profile-every=10", f"--profile-steps={start}-{start + 1}"], ["--profile-every"]


INVALID_FLAGS = st.one_of(non_integer_value(), non_number_value(), out_of_range_number(),
                          unknown_name(), unknown_host_metric(), malformed_ranks(),
                          malformed_steps(), unknown_flag(), switch_with_a_value(),
                          contradictory_flags(), non_finite_number(), list_naming_nothing())


@pytest.mark.slow  # every generated case through show-config or a training process
@settings(max_examples=160, deadline=None)
@given(INVALID_FLAGS)
def test_every_invalid_flag_combination_exits_2_naming_the_flag_and_the_fix(case):
    argv, names = case
    assert_usage_error(*run_cli("show-config", *argv), names)


# -- invalid YAML files --------------------------------------------------------------------------

KEYS = sorted(k for k in KNOBS if k != "profile_config")


def wrong_type_for(kind):
    """YAML values that are not of ``kind``."""
    text = LETTERS.map(lambda s: f"x{s}")
    return {
        "bool": st.one_of(text, st.integers(), st.lists(st.integers(), min_size=1, max_size=2)),
        "int": st.one_of(text, st.booleans(), st.floats(allow_nan=False).map(lambda f: f + 0.5),
                         st.lists(st.integers(), min_size=1, max_size=2)),
        "float?": st.one_of(text, st.booleans(), st.lists(st.integers(), min_size=1, max_size=2)),
        "str": st.one_of(st.integers(), st.booleans(), st.lists(text, min_size=1, max_size=2)),
        "path": st.one_of(st.integers(), st.booleans(), st.lists(text, min_size=1, max_size=2)),
        "secret": st.one_of(st.integers(), st.booleans(), st.lists(text, min_size=1, max_size=2)),
        "choice": st.one_of(st.integers(), st.booleans(), st.lists(text, min_size=1, max_size=2)),
        "choice?": st.one_of(st.integers(), st.booleans(), st.lists(text, min_size=1, max_size=2)),
        "ranks": st.one_of(st.booleans(), st.floats(allow_nan=False).map(lambda f: f + 0.5),
                           st.dictionaries(text, st.integers(), min_size=1, max_size=1)),
        "list": st.one_of(st.booleans(), st.floats(allow_nan=False).map(lambda f: f + 0.5),
                          st.dictionaries(text, st.integers(), min_size=1, max_size=1)),
        "steps": st.one_of(st.booleans(), st.floats(allow_nan=False).map(lambda f: f + 0.5),
                           st.dictionaries(text, st.integers(), min_size=1, max_size=1)),
        "forwards": st.one_of(st.booleans(), st.floats(allow_nan=False).map(lambda f: f + 0.5),
                              st.dictionaries(text, st.integers(), min_size=1, max_size=1)),
    }[kind]


def yaml_scalar(value):
    import yaml
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


@st.composite
def wrongly_typed_key(draw):
    key = draw(st.sampled_from(KEYS))
    value = draw(wrong_type_for(KNOBS[key].metadata["kind"].name))
    return f"{key}: {yaml_scalar(value)}\n", [key]


@st.composite
def unknown_key(draw):
    key = draw(st.one_of(
        LETTERS.map(lambda s: f"profile_{s}"),
        st.tuples(st.sampled_from(KEYS), st.integers(2, 30)).map(lambda t: t[0][:t[1]] + t[0][t[1] + 1:]),
        LETTERS,
    ).filter(lambda k: k not in KNOBS))
    return f"profile: true\n{key}: 1\n", [key]


@st.composite
def out_of_range_key(draw):
    case = draw(st.sampled_from(["start", "end", "gc", "every", "ranks", "steps", "non-finite",
                                 "no-rank"]))
    if case == "start":
        return f"profile_step_start: {draw(st.integers(max_value=0))}\n", ["profile_step_start",
                                                                             "--profile-step-start"]
    if case == "end":
        start = draw(st.integers(1, 10**5))
        end = draw(st.integers(-10**5, start).filter(lambda e: e != -1))
        return (f"profile_step_start: {start}\nprofile_step_end: {end}\n",
                ["profile_step_end", "--profile-step-end"])
    if case == "gc":
        value = draw(st.floats(max_value=-0.01, allow_nan=False, allow_infinity=False))
        return f"profile_gc_detect_threshold: {value}\n", ["profile_gc_detect_threshold",
                                                            "--profile-gc-detect-threshold"]
    if case == "every":
        return f"profile_every: {draw(st.integers(max_value=-1))}\n", ["profile_every",
                                                                        "--profile-every"]
    if case == "ranks":
        bad = draw(st.sampled_from(["[a, b]", "'0-'", "[-3]", "'9-2'", "'tq=0'", "[0, x1]"]))
        return f"profile_ranks: {bad}\n", ["profile_ranks", "--profile-ranks"]
    if case == "no-rank":
        key = draw(st.sampled_from(["profile_ranks", "profile_steps"]))
        bad = draw(st.sampled_from(["[]", "''", "','", "' , '", "['']", "[',', '']"] +
                                   (["null", ""] if key == "profile_ranks" else [])))
        return f"{key}: {bad}\n", [key, flag_name(key)]
    if case == "non-finite":
        key = draw(st.sampled_from(["profile_max_gb", "profile_gc_detect_threshold"]))
        bad = draw(st.sampled_from([".nan", ".NaN", ".inf", ".Inf", "-.inf", "+.inf"]))
        return f"{key}: {bad}\n", [key, flag_name(key)]
    bad = draw(st.sampled_from(["'5-3'", "'a-b'", "[0-2]", "'1-5,3-8'"]))
    return f"profile_steps: {bad}\n", ["profile_steps", "--profile-steps"]


@st.composite
def broken_yaml(draw):
    text = draw(st.sampled_from([
        "profile_step_start: [1, 2\n",
        "profile_ranks: {0: \n",
        "profile_level: 'level1\n",
        "profile: true\n  profile_step_start: 3\n bad\n",
        "profile_step_start: 3\nprofile_step_start: : 4\n",
        "- profile_step_start\n- 3\n",
        "42\n",
        "'just a string'\n",
        "\tprofile: true\n",
    ]))
    return text, ["--profile-config"]


INVALID_YAML = st.one_of(wrongly_typed_key(), unknown_key(), out_of_range_key(), broken_yaml())


@pytest.mark.slow  # every generated case through show-config or a training process
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(INVALID_YAML)
def test_every_invalid_yaml_file_exits_2_naming_the_key_and_the_fix(case):
    text, names = case
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "profile.yaml")
        with open(path, "w") as handle:
            handle.write(text)
        assert_usage_error(*run_cli("show-config", "--profile-config", path), names)


def test_a_command_line_flag_that_contradicts_the_yaml_file_names_both_sources(tmp_path):
    path = tmp_path / "profile.yaml"
    path.write_text("profile_step_start: 20\n")
    code, err = run_cli("show-config", "--profile-config", path, "--profile-step-end", "8")
    assert_usage_error(code, err, ["--profile-step-end"])
    assert "profile_step_start" in err and str(path) in err


# -- the other commands' own arguments -----------------------------------------------------------

COMMAND_CASES = [
    (["check"], ["DIR"]),
    (["check", "{missing}"], ["DIR"]),
    (["check", "{folder}", "--ranks", "x"], ["--ranks"]),
    (["check", "{folder}", "--bogus"], ["--bogus"]),
    (["check", "{folder}", "--jsn"], ["--jsn"]),
    (["summary"], ["DIR"]),
    (["summary", "{missing}"], ["DIR"]),
    (["summary", "{folder}", "--top", "0"], ["--top"]),
    (["summary", "{folder}", "--top", "many"], ["--top"]),
    (["summary", "{folder}", "--csvv"], ["--csvv"]),
    (["adapt-script"], ["IN.sh"]),
    (["adapt-script", "{missing}"], ["{missing}"]),
    (["adapt-script", "{script}", "--profile-step-strat", "3"], ["--profile-step-strat"]),
    (["adapt-script", "{script}", "--profile-ranks", "3-1"], ["--profile-ranks"]),
    (["adapt-script", "{script}", "--line", "x"], ["--line"]),
    (["show-config", "--world-size", "0"], ["--world-size"]),
    (["show-config", "--train-iters", "2", "--profile-step-start", "5"], ["--profile-step-start"]),
    (["show-config", "--profile-ranks"], ["--profile-ranks"]),
    (["show-config", "--profile-ranks", ""], ["--profile-ranks"]),
    (["show-config", "--profile-save-path", "{script}/prof"], ["--profile-save-path"]),
    (["show-config", "--world-size", "2", "--profile-ranks", "2"], ["--profile-ranks"]),
    (["show-config", "--train-iters", "9", "--profile-steps", "3-4,8-12"], ["--profile-steps"]),
    (["show-config", "--first-iteration", "20", "--profile-steps", "3-4"], ["--profile-steps"]),
    (["trigger", "{folder}", "--steps", "1"], ["{folder}"]),
    (["show-config", "--profile-forwards", "0-2"], ["--profile-forwards"]),
    (["show-config", "--profile-forwards", "5-2"], ["--profile-forwards"]),
    (["show-config", "--profile-forwards", "1-2,4-5"], ["--profile-forwards"]),
    (["show-config", "--profile-forwards", "x"], ["--profile-forwards"]),
    (["show-config", "--unit", "engine-step", "--train-iters", "5"], ["--train-iters"]),
]


def test_every_command_refuses_bad_arguments_with_exit_2_naming_the_argument(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nproc-per-node 8 pretrain_gpt.py --train-iters 10\n")
    places = {"folder": tmp_path, "missing": tmp_path / "nope", "script": script}
    for argv, names in COMMAND_CASES:
        argv = [a.format(**places) for a in argv]
        names = [n.format(**places) for n in names]
        assert_usage_error(*run_cli(*argv), names)


# -- the real processes --------------------------------------------------------------------------

def test_console_script_exits_2_with_one_line_and_no_traceback(tmp_path):
    result = subprocess.run([os.path.join(os.path.dirname(sys.executable), "mindspeed-prof"),
                             "show-config", "--profile-ranks", "0", "x"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "--profile-ranks 'x'" in result.stderr


@pytest.mark.slow  # every generated case through show-config or a training process
@pytest.mark.parametrize("bad, message", [
    (["--profile-level", "Level9"],
     "--profile-level 'Level9' is not one of level_none, level0, level1, level2"),
    (["--profile-levl", "level1"], "unrecognized option '--profile-levl'; did you mean "
                                   "--profile-level?"),
    (["--profile-ranks", ""], "--profile-ranks '' names no rank"),
], ids=["bad value", "mistyped flag", "empty rank list"])
def test_training_with_an_invalid_flag_exits_2_with_one_clear_message(tmp_path, bad, message):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(STANDIN_DIR),
                                                       os.environ.get("PYTHONPATH", "")]),
           "MINDSPEED_PROF_AUTOLOAD": "0", "TORCHDYNAMO_DISABLE": "1"}
    result = subprocess.run([sys.executable, "-m", "mindspeed_prof.launch", str(ENTRY_SCRIPT),
                             *default_args(), "--profile", *bad],
                            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert "ran no loop mindspeed_prof hooks" not in result.stderr
