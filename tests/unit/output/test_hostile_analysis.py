"""The analysis commands (timeline, report, diff, summary, merge, check) on hostile or odd input
(issue 35 §1): numbers that are not finite, an output that names an input, outputs the system
refuses, escapes in what a manifest or the user wrote, huge rank ranges, compressed torch
traces and a signal in the middle of a write. Each is a clear line or a stated, counted note,
never a traceback, a claim about a NaN, a file written over, or a temporary file left behind.
"""

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc

import pytest

from helpers.cli import run_cli, run_cli_json
from output_fixtures import samples
from output_fixtures.simulated_job import simulated_job
from output_fixtures.torch_traces import torch_trace

from mindspeed_prof.config.ranks import parse_rank_tokens, resolve
from mindspeed_prof.output.render import jsontext

HOSTILE = "\x1b]0;pwned\x07\x1b[2J"  # sets the terminal's title, then clears the screen
NON_FINITE = ["inf", "nan", 1e308, "1e400", "-Infinity"]


def strict_json(text):
    """``json.loads`` as jq and every strict parser read: NaN/Infinity refused."""
    def refuse(constant):
        raise AssertionError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def merged(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return strict_json(handle.read())


def write_manifest(save, rank, hostname="node0", **fields):
    samples.write_manifest(save, rank, hostname=hostname, world_size=2, backend="torch",
                           parallel={"tensor_model_parallel_size": 2,
                                     "pipeline_model_parallel_size": 1,
                                     "data_parallel_size": 1, "context_parallel_size": 1,
                                     "rank": rank, "world_size": 2}, **fields)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """Ranks 0 and 1 of a tp=2 job on one host, iterations 5-7, with manifests."""
    save = tmp_path_factory.mktemp("hostile") / "prof"
    for rank in (0, 1):
        torch_trace(save, rank=rank, start=5, end=8)
        write_manifest(save, rank)
    return save


def copy_of(clean, tmp_path, name="prof"):
    save = tmp_path / name
    shutil.copytree(clean, save)
    return save


def trace_of(save, rank):
    return next(save.glob(f"rank{rank}.*.pt.trace.json*"))


def edit_trace(path, change):
    with open(path) as handle:
        data = json.load(handle)
    change(data["traceEvents"])
    with open(path, "w") as handle:
        json.dump(data, handle)  # json writes NaN/Infinity as torch's readers take them


def set_step(events, number, field, value):
    for event in events:
        if event.get("name") == f"ProfilerStep#{number}":
            event[field] = value


def one_line(err):
    return len(err.strip().splitlines()) == 1 and "Traceback" not in err


# 1. non-finite numbers: unreadable, said, counted; every JSON output strict


@pytest.mark.parametrize("field", ["ts", "dur"])
@pytest.mark.parametrize("value", NON_FINITE)
def test_a_step_whose_time_is_no_finite_number_is_said_and_never_aligned_on(
        clean, tmp_path, capsys, field, value):
    save = copy_of(clean, tmp_path)
    edit_trace(trace_of(save, 1), lambda events: set_step(events, 6, field, value))
    out = tmp_path / "merged.json.gz"

    code, printed, err = run_cli(capsys, "timeline", save, "-o", out)

    assert code == 0, err
    assert "ProfilerStep#5,7 (recorded by every rank)" in printed  # 6 is not aligned on
    assert "nan" not in printed.lower()
    assert f"ProfilerStep#6 {field}" in err and trace_of(save, 1).name in err
    data = merged(out)
    assert all(isinstance(e["ts"], (int, float)) for e in data["traceEvents"] if "ts" in e)
    code, report = run_cli_json(capsys, "check", save)
    rank1 = next(r for r in report["ranks"] if r["rank"] == 1)
    assert code == 0 and rank1["verdict"] == "valid"  # the step was recorded; its time is not
    assert any(f"ProfilerStep#6 {field}" in w and "not a finite number" in w
               for run in rank1["runs"] for w in run["warnings"])


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", 1e308])
def test_events_whose_ts_is_no_finite_number_are_counted_unreadable_not_written_as_null(
        clean, tmp_path, capsys, value):
    save = copy_of(clean, tmp_path)
    spoiled = []

    def spoil(events):
        for event in events:
            if event.get("ph") == "X" and event.get("name", "").startswith("aten::") \
                    and len(spoiled) < 3:
                event["ts"] = value
                spoiled.append(event)
    edit_trace(trace_of(save, 0), spoil)
    out = tmp_path / "merged.json"

    code, printed, _ = run_cli(capsys, "timeline", save, "-o", out)

    assert code == 0
    data = merged(out)
    assert data["mindspeed_prof"]["unreadable"] == 3
    assert not [e for e in data["traceEvents"] if "ts" in e and e["ts"] is None]
    written = [e for e in data["traceEvents"] if e["ph"] != "M"]
    assert data["mindspeed_prof"]["events"] == len(data["traceEvents"]) and written
    assert "3 without a usable timestamp or duration" in printed


@pytest.mark.parametrize("field,value", [("pid", {"a": 1}), ("tid", {"a": [1]}),
                                         ("pid", [{"b": 2}]), ("ph", ["s"]), ("ph", {"f": 1})])
def test_events_whose_pid_tid_or_ph_is_an_object_or_list_are_merged_not_a_traceback(
        clean, tmp_path, capsys, field, value):
    # a dict pid/tid, or a list ph on an event with an id, raised "unhashable" in timeline
    save = copy_of(clean, tmp_path)

    def spoil(events):
        chosen = [e for e in events if e.get("ph") == "X" and "aten::" in e.get("name", "")][:2]
        for event in chosen:
            event[field] = value
            event["id"] = 7
    edit_trace(trace_of(save, 0), spoil)
    out = tmp_path / "merged.json"

    code, _, err = run_cli(capsys, "timeline", save, "-o", out)

    assert code == 0, err
    data = merged(out)
    assert data["mindspeed_prof"]["events"] == len(data["traceEvents"])


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_min_us_that_is_no_finite_number_is_a_usage_error(clean, tmp_path, capsys, value):
    code, _, err = run_cli(capsys, "timeline", clean, "-o", tmp_path / "x.json.gz",
                           f"--min-us={value}")
    assert code == 2 and one_line(err) and "--min-us" in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("value", ["inf", "nan", 1e308])
def test_summary_diff_and_report_on_non_finite_durations_write_strict_json(
        clean, tmp_path, capsys, value):
    save = copy_of(clean, tmp_path)

    def spoil(events):
        set_step(events, 6, "dur", value)
        for event in events:
            if event.get("name", "").startswith("aten::"):
                event["dur"] = value  # an operator's self time too
    edit_trace(trace_of(save, 1), spoil)

    code, out, _ = run_cli(capsys, "summary", save, "--json")
    data = strict_json(out)
    assert code == 0
    rank1 = next(r for r in data["ranks"] if r["rank"] == 1)
    assert any("not a finite number" in note for note in rank1["notes"])
    code, out, _ = run_cli(capsys, "diff", clean, save, "--json")
    strict_json(out)
    pytest.importorskip("plotly")
    code, _, err = run_cli(capsys, "report", save, "-o", tmp_path / "r.html")
    assert code == 0 and "Traceback" not in err and (tmp_path / "r.html").stat().st_size


def test_merge_json_of_a_node_report_holding_nan_is_strict_with_the_count_stated(
        clean, tmp_path, capsys):
    report = tmp_path / "node0.json"
    assert run_cli(capsys, "check", clean, "--node", "0/1", "--report", report)[0] == 0
    data = json.loads(report.read_text())
    step = data["summary"]["ranks"][0]["steps"][0]
    step["step_time"] = float("nan")
    report.write_text(json.dumps(data))  # NaN, as a hand edit or another writer leaves it

    code, out, _ = run_cli(capsys, "merge", report, "--json")

    merged_data = strict_json(out)
    assert merged_data[jsontext.NON_FINITE_KEY] >= 1


def test_the_json_helper_writes_non_finite_numbers_as_null_and_states_how_many():
    text = jsontext.dumps({"a": [1.5, float("nan")], "b": {"c": float("inf")}, "d": "x"})
    assert strict_json(text) == {"a": [1.5, None], "b": {"c": None}, "d": "x",
                                 jsontext.NON_FINITE_KEY: 2}
    assert jsontext.dumps({"a": 1.0}) == json.dumps({"a": 1.0}, indent=2)  # unchanged


# 2. an output that names an input is refused, before anything is written


@pytest.mark.parametrize("command,flag,name", [
    ("timeline", "-o", "{trace1}"),
    ("timeline", "-o", "profile_manifest_rank0.json"),
    ("timeline", "-o", "rank1.1.pt.trace.json.gz"),
    ("check", "--report", "profile_manifest_rank{{node}}.json"),
    ("summary", "--plot", "x_ascend_pt/steps.png"),
    ("report", "-o", "x_ascend_pt/report.html"),
])
def test_an_output_named_as_an_input_is_refused_and_the_inputs_stay_as_they_were(
        clean, tmp_path, capsys, command, flag, name):
    save = copy_of(clean, tmp_path)
    (save / "x_ascend_pt").mkdir()
    before = {p.name: p.read_bytes() for p in save.iterdir() if p.is_file()}
    target = save / name.format(trace1=trace_of(save, 1).name)
    extra = ["--node", "0/1"] if command == "check" else []

    code, _, err = run_cli(capsys, command, save, flag, target, *extra)

    assert code == 2 and one_line(err) and f"{flag} {save}" in err
    assert "give another name" in err
    assert {p.name: p.read_bytes() for p in save.iterdir() if p.is_file()} == before
    assert not list((save / "x_ascend_pt").iterdir())


def test_memory_html_over_the_snapshot_it_reads_is_refused(tmp_path, capsys):
    import pickle

    from helpers.snapshots import snapshot

    path = tmp_path / "memory_snapshot_rank0.pickle"
    path.write_bytes(pickle.dumps(snapshot()))
    before = path.read_bytes()
    for target in (path, tmp_path / "memory_oom_rank1.pickle"):
        code, _, err = run_cli(capsys, "memory", tmp_path, "--html", target)
        assert code == 2 and one_line(err) and f"--html {target}" in err
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == [path.name]


def test_an_output_inside_the_save_path_under_a_name_of_its_own_is_written(
        clean, tmp_path, capsys):
    save = copy_of(clean, tmp_path)
    assert run_cli(capsys, "timeline", save, "-o", save / "merged.json.gz")[0] == 0
    assert run_cli(capsys, "check", save)[0] == 0  # still two valid ranks, nothing new


# 3. outputs the system refuses: one line, exit 2; a long legal name is accepted


@pytest.mark.parametrize("command,output", [
    ("timeline", "/proc/x.json.gz"),
    ("report", "/proc/x.html"),
    ("timeline", "/proc/self/nope/x.json.gz"),
])
def test_an_output_the_system_refuses_is_one_line_and_exit_2(clean, capsys, command, output):
    if command == "report":
        pytest.importorskip("plotly")
    code, _, err = run_cli(capsys, command, clean, "-o", output)
    assert code == 2 and one_line(err) and f"-o {output}" in err


@pytest.mark.parametrize("command,suffix", [("timeline", ".json.gz"), ("report", ".html")])
def test_a_legal_name_whose_temporary_sibling_would_be_too_long_is_written(
        clean, tmp_path, capsys, command, suffix):
    if command == "report":
        pytest.importorskip("plotly")
    name_max = os.pathconf(tmp_path, "PC_NAME_MAX")
    out = tmp_path / ("a" * (name_max - len(suffix)) + suffix)  # exactly NAME_MAX

    code, _, err = run_cli(capsys, command, clean, "-o", out)

    assert code in (0, 1) and "Traceback" not in err, err
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temporary left


def test_a_name_past_name_max_is_one_line(clean, tmp_path, capsys):
    out = tmp_path / ("b" * 300 + ".json.gz")
    code, _, err = run_cli(capsys, "timeline", clean, "-o", out)
    assert code == 2 and one_line(err) and "cannot write it" in err


# 4. text from a manifest or the command line reaches the terminal escaped


def test_roles_units_and_user_text_reach_the_terminal_escaped_in_every_command(
        clean, tmp_path, capsys):
    roles = tmp_path / "rl"
    for rank in (0, 1):
        torch_trace(roles / "actor", rank=rank, start=5, end=7)
        write_manifest(roles / "actor", rank, role=f"actor{HOSTILE}")
    unit = copy_of(clean, tmp_path, "unit")
    for rank in (0, 1):
        write_manifest(unit, rank, unit=f"iteration{HOSTILE}")
    runs = [
        ("timeline", roles, "-o", tmp_path / "t.json.gz"),  # names the roles it holds
        ("timeline", roles, "-o", tmp_path / "t.json.gz", "--role", HOSTILE),
        ("timeline", clean, "-o", tmp_path / "t.json.gz", "--role", HOSTILE),
        ("timeline", clean, "-o", tmp_path / "t.json.gz", "--steps", HOSTILE),
        ("timeline", clean, "-o", tmp_path / "t.json.gz", "--ranks", HOSTILE),
        ("timeline", unit, "-o", tmp_path / "u.json.gz"),
        ("diff", clean, unit),  # not compared: another unit, named from the manifest
        ("diff", clean, tmp_path / HOSTILE),
        ("summary", clean, "--run", HOSTILE),
        ("check", clean, "--run", HOSTILE),
        ("check", clean, "--ranks", HOSTILE),
        ("summary", roles, "--run", HOSTILE),
        ("report", clean, "-o", tmp_path / f"{HOSTILE}.html"),
        ("merge", tmp_path / HOSTILE),
        ("memory", tmp_path / HOSTILE),
        ("trigger", tmp_path / HOSTILE / "t.json", "--steps", "1"),
        ("trigger", tmp_path / "t.json", "--steps", "1", "--ranks", HOSTILE),
        ("analyse", tmp_path / HOSTILE),
    ]
    for command, *args in runs:
        code, out, err = run_cli(capsys, command, *args)
        assert "\x1b" not in out + err and "\x07" not in out + err, (command, args, out, err)
        assert "Traceback" not in err


# 5. huge rank ranges stay ranges; past any world size they are refused


@pytest.mark.parametrize("command", ["timeline", "check"])
def test_a_rank_range_past_any_world_size_is_one_line_exit_2(clean, tmp_path, capsys, command):
    extra = ["-o", tmp_path / "x.json.gz"] if command == "timeline" else []
    started = time.monotonic()
    code, _, err = run_cli(capsys, command, clean, *extra, "--ranks", "0-400000000")
    assert code == 2 and one_line(err) and "--ranks 0-400000000" in err
    assert "beyond any job's world size" in err and time.monotonic() - started < 10


def test_a_million_rank_range_costs_what_a_small_one_does(clean, tmp_path, capsys):
    tracemalloc.start()
    try:
        selection = parse_rank_tokens(["0-1000000"])
        chosen = resolve(selection, 2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert chosen == [0, 1] and peak < 1 << 20  # the list of a million ranks: ~36 MB
    code, printed, _ = run_cli(capsys, "timeline", clean, "-o", tmp_path / "x.json.gz",
                               "--ranks", "0-1000000")
    assert code == 0 and "2 rank(s)" in printed


# 6. a compressed torch trace keeps its clock base


def test_a_gzip_torch_trace_is_on_the_same_clock_as_the_plain_ones(clean, tmp_path, capsys):
    save = copy_of(clean, tmp_path)
    plain = trace_of(save, 1)
    with open(plain, "rb") as source, gzip.open(f"{plain}.gz", "wb") as target:
        shutil.copyfileobj(source, target)
    plain.unlink()
    out = tmp_path / "merged.json"

    code, printed, err = run_cli(capsys, "timeline", save, "-o", out)

    assert code == 0, err
    starts = {}
    for event in merged(out)["traceEvents"]:
        if event["ph"] == "X" and event["name"] == "ProfilerStep#5":
            starts[event["pid"]] = event["ts"]
    # both ranks traced on this host within seconds; without the base one lands ~54 years off
    assert abs(starts[1] - starts[2]) < 600e6, starts


# 7. a signal in the middle of a write leaves no temporary file


@pytest.fixture(scope="module")
def big_job(tmp_path_factory):
    """Four ranks of 30,000 steps each (~44 MB): long enough to signal a write mid-way, when
    the signal goes as the first part appears (the C rewrite writes a rank's in ~0.1 s). On one
    host: no clocks to align on the collectives, which would read every rank's summary first
    (8 of the 10 s each run took, with the cache off)."""
    return simulated_job(tmp_path_factory.mktemp("big") / "prof", ranks=4,
                         steps=range(1, 30001), hosts=4)


@pytest.mark.slow  # the command in child interpreters, signalled mid-write
@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("signum,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_timeline_writes_removes_its_temporary_files(
        big_job, tmp_path, workers, signum, code):
    env = dict(os.environ, MINDSPEED_PROF_OUTPUT_WORKERS=workers, MINDSPEED_PROF_CACHE="off")
    out = tmp_path / "out"
    out.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-m", "mindspeed_prof.cli", "timeline", str(big_job), "-o",
         str(out / "m.json.gz")], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True,
        # a shell's background job starts with SIGINT ignored: the test sets what it relies on
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not list(out.glob("*.part")) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert child.poll() is None, "the write ended before the signal: make the job bigger"
    child.send_signal(signum)  # at once: the C rewrite writes a part in a fraction of a second
    try:
        _, err = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        pytest.fail("timeline did not end after the signal")
    assert child.returncode == code, err
    assert "Traceback" not in err
    assert ("terminated (SIGTERM)" if signum == signal.SIGTERM else "interrupted") in err
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("value", ["1e308", "inf", "nan"])
def test_a_kernel_duration_that_is_no_finite_number_is_left_out_of_the_kernel_totals(
        tmp_path, capsys, value):
    import csv

    capture = samples.npu_capture(tmp_path / "npu", rank=0, op_statistic=False)
    table = os.path.join(capture, samples.OUTPUT, "kernel_details.csv")
    with open(table, newline="") as handle:
        rows = list(csv.reader(handle))
    column = rows[0].index("Duration(us)")
    rows[1][column] = value
    rows[2][column] = value
    with open(table, "w", newline="") as handle:
        csv.writer(handle).writerows(rows)

    code, out, _ = run_cli(capsys, "summary", tmp_path / "npu", "--json", "--no-cache")

    data = strict_json(out)
    assert jsontext.NON_FINITE_KEY not in data  # left out where read, not nulled at the end
    totals = [k["total_us"] for r in data["ranks"] for k in r["top_kernels"]]
    assert totals and all(isinstance(t, float) and t < 1e18 for t in totals)


def test_export_to_a_folder_the_system_refuses_is_one_line_and_exit_2(tmp_path, capsys):
    from output_fixtures import whatif_job

    save = whatif_job.write_capture(tmp_path / "save", whatif_job.play())
    code, _, err = run_cli(capsys, "export", save, "--format", "straggler-analysis", "-o",
                           "/proc/export")
    assert code == 2 and one_line(err) and "-o /proc/export: cannot write it" in err
