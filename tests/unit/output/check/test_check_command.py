"""`mindspeed-prof check`: one verdict per rank, from real Ascend output and damaged copies."""

import json
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.cli import rank_entry, run_cli, run_cli_json
from mindspeed_prof.output import check_directory
from mindspeed_prof.output.check.report import VERDICTS
from output_fixtures import corrupt, samples
from output_fixtures.torch_traces import torch_trace

OUT = samples.OUTPUT


def check(capsys, *args):
    return run_cli(capsys, "check", *args)


def check_json(capsys, *args):
    return run_cli_json(capsys, "check", *args)


rank_of = rank_entry


def problems(rank_entry):
    return " | ".join(rank_entry["problems"]
                      + [p for r in rank_entry["runs"] for p in r["problems"]])


def warnings(rank_entry):
    return " | ".join(rank_entry["warnings"]
                      + [w for r in rank_entry["runs"] for w in r["warnings"]])


def test_two_real_ranks_are_valid_and_exit_zero(tmp_path, capsys):
    samples.two_ranks(tmp_path)
    code, out, _ = check(capsys, tmp_path)
    assert code == 0
    assert "0     valid" in out and "1     valid" in out and "exit 0" in out


def test_json_report_has_a_verdict_per_rank_and_per_file(tmp_path, capsys):
    samples.two_ranks(tmp_path)
    code, report = check_json(capsys, tmp_path)
    assert code == 0 and report["ok"] and report["exit_code"] == 0
    run = rank_of(report, 0)["runs"][0]
    assert run["verdict"] == "valid" and run["settings"] == "level1 text"
    files = {f["name"]: f for f in run["files"]}
    assert files["kernel_details.csv"]["status"] == "ok"
    assert files["kernel_details.csv"]["malformed_rows"] == 1  # the upstream sample's line 17
    assert files["trace_view.json"]["events"] == 3670


def test_capture_without_profiler_info_was_not_stopped(tmp_path, capsys):
    samples.npu_capture(tmp_path, 0, info=None, parsed=False, raw=True)
    code, report = check_json(capsys, tmp_path)
    assert code == 1
    entry = rank_of(report, 0)
    assert entry["verdict"] == "not_stopped" and "stop() never ran" in problems(entry)


def test_raw_data_without_parsed_output_is_unparsed_and_names_analyse(tmp_path, capsys):
    samples.npu_capture(tmp_path, 0, parsed=False, raw=True)
    code, out, _ = check(capsys, tmp_path)
    assert code == 1 and "unparsed" in out and "mindspeed-prof analyse" in out


def test_level1_capture_without_op_statistic_is_incomplete(tmp_path, capsys):
    samples.npu_capture(tmp_path, 0, op_statistic=False)
    code, report = check_json(capsys, tmp_path)
    entry = rank_of(report, 0)
    assert code == 1 and entry["verdict"] == "incomplete"
    assert "op_statistic.csv (level1 writes it)" in problems(entry)


def test_level0_capture_needs_no_op_statistic(tmp_path, capsys):
    samples.npu_capture(tmp_path, 0, op_statistic=False,
                        info_changes={"experimental_config": {"_profiler_level": "Level0"}})
    code, report = check_json(capsys, tmp_path)
    assert code == 0 and rank_of(report, 0)["runs"][0]["settings"] == "level0 text"


def test_memory_files_are_expected_only_with_profile_memory(tmp_path, capsys):
    path = samples.npu_capture(tmp_path, 0)
    os.remove(os.path.join(path, OUT, "memory_record.csv"))
    code, report = check_json(capsys, tmp_path)
    assert code == 1 and "memory_record.csv (--profile-with-memory" in problems(rank_of(report, 0))
    shutil.rmtree(path)
    path = samples.npu_capture(tmp_path, 0,
                               info_changes={"common_config": {"profile_memory": False}})
    os.remove(os.path.join(path, OUT, "memory_record.csv"))
    assert check_json(capsys, tmp_path)[0] == 0


def test_record_shapes_needs_the_input_shapes_column(tmp_path, capsys):
    path = samples.npu_capture(tmp_path, 0)
    corrupt.rename_header(os.path.join(path, OUT, "operator_details.csv"), "Input Shapes", "Shapes")
    code, report = check_json(capsys, tmp_path)
    assert code == 1 and "'Input Shapes'" in problems(rank_of(report, 0))


@pytest.mark.parametrize("name, damage, reason", [
    ("kernel_details.csv", corrupt.zero_bytes, "empty file (0 bytes)"),
    ("kernel_details.csv", lambda p: corrupt.truncate(p, 0.6), "cut short"),
    ("kernel_details.csv", lambda p: corrupt.rename_header(p, "Duration(us)", "Dur(us)"),
     "no column 'Duration(us)'"),
    ("step_trace_time.csv", lambda p: corrupt.rename_header(p, "Computing", "Compute"),
     "no column 'Computing'"),
    ("trace_view.json", lambda p: corrupt.truncate(p, 0.5), "truncated JSON"),
    ("trace_view.json", corrupt.zero_bytes, "empty file"),
    ("communication.json", lambda p: corrupt.truncate(p, 0.5),
     "ASCEND_PROFILER_OUTPUT/communication.json"),
])
def test_damaged_files_make_the_rank_corrupt_with_the_file_and_reason(tmp_path, capsys, name,
                                                                       damage, reason):
    path = samples.npu_capture(tmp_path, 0)
    damage(os.path.join(path, OUT, name))
    code, report = check_json(capsys, tmp_path)
    entry = rank_of(report, 0)
    assert code == 1 and entry["verdict"] == "corrupt"
    assert name in problems(entry) and reason in problems(entry)


def test_truncated_profiler_info_is_corrupt(tmp_path, capsys):
    path = samples.npu_capture(tmp_path, 0)
    corrupt.truncate(os.path.join(path, "profiler_info_0.json"), 0.5)
    code, report = check_json(capsys, tmp_path)
    entry = rank_of(report, 0)
    assert code == 1 and entry["verdict"] == "corrupt" and "profiler_info_0.json" in problems(entry)


def test_profiler_info_without_rank_warns_that_msprof_analyze_drops_the_folder(tmp_path, capsys):
    samples.npu_capture(tmp_path, 3, info="unranked")
    code, report = check_json(capsys, tmp_path)
    entry = rank_of(report, 3)  # from the rank3_... folder name
    assert code == 0 and entry["runs"][0]["rank_source"] == "folder name"
    assert "msprof-analyze cluster drops this folder" in warnings(entry)
    assert "profiler_info_<rank>.json" in warnings(entry)


def test_rank_id_written_as_a_string_is_a_rank(tmp_path, capsys):
    path = samples.npu_capture(tmp_path, 5, info="unranked")
    os.rename(path, os.path.join(tmp_path, "host_1_20230919172259000_ascend_pt"))
    info = os.path.join(tmp_path, "host_1_20230919172259000_ascend_pt", "profiler_info.json")
    with open(info) as handle:
        data = json.load(handle)
    data["rank_id"] = "5"
    with open(info, "w") as handle:
        json.dump(data, handle)
    code, report = check_json(capsys, tmp_path)
    assert [r["rank"] for r in report["ranks"]] == [5]


def test_expected_ranks_that_left_nothing_are_missing(tmp_path, capsys):
    samples.npu_capture(tmp_path, 0)
    code, report = check_json(capsys, tmp_path, "--ranks", "0-2")
    assert code == 1 and report["expected_ranks"] == [0, 1, 2]
    assert [r["verdict"] for r in report["ranks"]] == ["valid", "missing", "missing"]


def test_ranks_limits_the_check_to_those_ranks(tmp_path, capsys):
    samples.two_ranks(tmp_path)
    shutil.rmtree(os.path.join(tmp_path, samples.run_name(1), OUT))
    code, report = check_json(capsys, tmp_path, "--ranks", "0")
    assert code == 0 and [r["rank"] for r in report["ranks"]] == [0]
    assert "also found rank(s) 1" in report["warnings"][0]


def test_manifests_say_which_ranks_were_expected(tmp_path, capsys):
    samples.npu_capture(tmp_path, 0)
    samples.write_manifest(tmp_path, 0, selected_ranks=[0, 1])
    code, report = check_json(capsys, tmp_path)
    assert code == 1 and rank_of(report, 1)["verdict"] == "missing"


def test_failed_manifest_makes_the_rank_fail_and_lists_its_errors(tmp_path, capsys):
    samples.npu_capture(tmp_path, 0)
    samples.write_manifest(tmp_path, 0, selected_ranks=[0], status="failed", errors=[
        {"time": "t", "phase": "stop", "message": "torch_npu stop() raised RuntimeError"}])
    code, out, _ = check(capsys, tmp_path)
    assert code == 1 and "incomplete" in out
    assert "[stop] torch_npu stop() raised RuntimeError" in out


def test_files_the_manifest_lists_must_exist(tmp_path, capsys):
    samples.npu_capture(tmp_path, 0)
    samples.write_manifest(tmp_path, 0, selected_ranks=[0], files=["gone_ascend_pt"])
    code, report = check_json(capsys, tmp_path)
    assert code == 1 and "gone_ascend_pt" in problems(rank_of(report, 0))


def test_manifest_config_fills_what_an_old_profiler_info_lacks(tmp_path, capsys):
    samples.npu_capture(tmp_path, 0)  # 2023 schema: no _export_type
    samples.write_manifest(tmp_path, 0, selected_ranks=[0], config={
        "profile_level": "level1", "profile_export_type": "text,db"})
    code, report = check_json(capsys, tmp_path)
    assert code == 1 and "ascend_pytorch_profiler_0.db (db export" in problems(rank_of(report, 0))


def test_several_captures_of_a_rank_are_each_checked_and_the_msprof_pick_named(tmp_path, capsys):
    # The real sample's trace holds ProfilerStep#1: its folder is the window of iteration 1.
    samples.npu_capture(tmp_path / "iter_1-1", 0, timestamp="20230919172259000")
    samples.npu_capture(tmp_path / "iter_20-22", 0, timestamp="20230919180000000",
                        op_statistic=False)
    code, report = check_json(capsys, tmp_path)
    entry = rank_of(report, 0)
    assert code == 1 and [r["verdict"] for r in entry["runs"]] == ["valid", "incomplete"]
    assert entry["runs"][0]["window"] == [1, 2]  # the folder names the last iteration
    assert entry["msprof_analyze_pick"].startswith("iter_20-22")
    assert "analyses only the newest" in warnings(entry)


def test_db_export_capture_is_valid_and_a_cut_database_corrupt(tmp_path, capsys):
    path = samples.db_capture(tmp_path, 0)
    assert check(capsys, tmp_path)[0] == 0
    corrupt.truncate(os.path.join(path, OUT, "ascend_pytorch_profiler_0.db"), 0.5)
    code, report = check_json(capsys, tmp_path)
    assert code == 1 and "truncated" in problems(rank_of(report, 0))


def test_parser_log_errors_are_listed(tmp_path, capsys):
    path = samples.npu_capture(tmp_path, 0)
    os.makedirs(os.path.join(path, "logs"))
    with open(os.path.join(path, "logs", "profiler_20230919_1_KernelViewParser.log"), "w") as log:
        log.write("[2023-09-19 17:22:59.000] [INFO] [AscendProfiler_KernelViewParser:1] start.\n"
                  "[2023-09-19 17:22:59.001] [ERROR] [AscendProfiler_KernelViewParser:9] "
                  "Failed to generate kernel_details.csv, error: boom\n")
    code, out, _ = check(capsys, tmp_path)
    assert code == 0  # analyse.done-style: the files are there, the error is reported
    assert "KernelViewParser.log:2: [2023-09-19 17:22:59.001] [ERROR]" in out


def test_torch_trace_with_the_window_steps_is_valid(tmp_path, capsys):
    path = torch_trace(tmp_path, rank=0, start=5, end=8)
    samples.write_manifest(tmp_path, 0, backend="torch", selected_ranks=[0], windows=[
        {"start": 5, "end": 8, "dir": ".", "status": "complete",
         "files": [os.path.basename(path)]}])
    code, report = check_json(capsys, tmp_path)
    run = rank_of(report, 0)["runs"][0]
    assert code == 0 and run["backend"] == "torch" and run["steps"] == [5, 6, 7]


def test_torch_trace_missing_window_steps_is_incomplete(tmp_path, capsys):
    path = torch_trace(tmp_path, rank=0, start=5, end=7)
    samples.write_manifest(tmp_path, 0, backend="torch", selected_ranks=[0], windows=[
        {"start": 5, "end": 9, "dir": ".", "status": "complete",
         "files": [os.path.basename(path)]}])
    code, report = check_json(capsys, tmp_path)
    assert code == 1 and "ProfilerStep#7-8 of window [5, 9) missing" in problems(rank_of(report, 0))


def test_torch_trace_without_profiler_steps_is_incomplete(tmp_path, capsys):
    torch_trace(tmp_path, rank=0, record_steps=False)
    code, report = check_json(capsys, tmp_path)
    assert code == 1 and "no ProfilerStep#N events" in problems(rank_of(report, 0))


def test_truncated_torch_trace_is_corrupt(tmp_path, capsys):
    path = torch_trace(tmp_path, rank=1)
    corrupt.truncate(path, 0.7)
    code, report = check_json(capsys, tmp_path)
    assert code == 1 and rank_of(report, 1)["verdict"] == "corrupt"


def test_missing_directory_is_a_usage_error_naming_it(tmp_path, capsys):
    code, out, err = check(capsys, tmp_path / "nope")
    assert code == 2 and str(tmp_path / "nope") in err and "--profile-save-path" in err


def test_bad_ranks_is_a_usage_error(tmp_path, capsys):
    code, _, err = check(capsys, tmp_path, "--ranks", "all")
    assert code == 2 and "--ranks" in err


def test_empty_directory_has_nothing_valid(tmp_path, capsys):
    code, out, _ = check(capsys, tmp_path)
    assert code == 1 and "no profiler output" in out


def test_programmatic_api_returns_the_report(tmp_path):
    samples.two_ranks(tmp_path)
    report = check_directory(str(tmp_path), expected_ranks=[0, 1, 2])
    assert report.exit_code == 1 and report.rank(0).verdict == "valid"
    assert report.rank(2).verdict == "missing"


def test_core_torch_backend_output_is_valid(tmp_path, capsys):
    import torch
    from mindspeed_prof import ProfilerConfig, profile

    save = tmp_path / "prof"
    config = ProfilerConfig(profile=True, profile_step_start=3, profile_step_end=5,
                            profile_save_path=str(save), profile_backend="torch")
    model = torch.nn.Linear(8, 8)
    with profile(config, train_iters=6, first_iteration=1, rank=0, world_size=1) as prof:
        for _ in range(6):
            model(torch.randn(2, 8)).sum().backward()
            prof.step()
    capsys.readouterr()  # the core's own progress lines
    code, report = check_json(capsys, save)
    assert code == 0 and rank_of(report, 0)["runs"][0]["steps"] == [3, 4]


_FUZZ_FILES = ["profiler_info_0.json", f"{OUT}/kernel_details.csv", f"{OUT}/trace_view.json",
               f"{OUT}/step_trace_time.csv", f"{OUT}/op_statistic.csv",
               f"{OUT}/operator_details.csv", f"{OUT}/communication.json"]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("pristine")
    samples.npu_capture(root, 0)
    return root


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(_FUZZ_FILES), seed=st.integers(0, 2 ** 32),
       how=st.sampled_from(["flip", "truncate", "zero", "garbage"]), keep=st.floats(0, 1))
def test_any_damage_to_real_files_gives_a_verdict_never_a_traceback(pristine, tmp_path, capsys,
                                                                    target, seed, how, keep):
    root = tmp_path / f"fuzz{seed}"
    shutil.copytree(pristine, root)
    path = os.path.join(root, samples.run_name(0), target)
    if how == "flip":
        corrupt.flip_bytes(path, seed, count=1 + seed % 64)
    elif how == "truncate":
        corrupt.truncate(path, keep)
    elif how == "zero":
        corrupt.zero_bytes(path)
    else:
        corrupt.write_bytes(path, os.urandom(1 + seed % 4096))
    code, out, err = check(capsys, root, "--json")
    assert code in (0, 1) and "Traceback" not in err
    report = json.loads(out)
    assert all(r["verdict"] in VERDICTS for r in report["ranks"])
    shutil.rmtree(root)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["rank", "status", "windows", "files", "errors", "selected_ranks",
                         "config", "start", "end", "dir", "phase", "message", "tool",
                         "common_config", "experimental_config", "_profiler_level",
                         "_export_type", "rank_id", "activities"]), inner, max_size=5),
    max_leaves=12)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(manifest=_json_values, info=_json_values)
def test_odd_manifest_and_profiler_info_contents_give_verdicts(pristine, tmp_path, capsys,
                                                               manifest, info):
    root = tmp_path / "odd"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(pristine, root)
    if isinstance(manifest, dict):
        manifest = {**manifest, "tool": "mindspeed_prof"}
    with open(root / "profile_manifest_rank0.json", "w") as handle:
        json.dump(manifest, handle)
    with open(root / samples.run_name(0) / "profiler_info_0.json", "w") as handle:
        json.dump(info if not isinstance(info, dict) else {"config": info, **info}, handle)
    code, out, err = check(capsys, root, "--json")
    assert code in (0, 1) and "Traceback" not in err
    assert all(r["verdict"] in VERDICTS for r in json.loads(out)["ranks"])


def test_one_capture_folder_can_be_checked_by_itself(tmp_path, capsys):
    path = samples.npu_capture(tmp_path, 1)
    code, report = check_json(capsys, path)
    assert code == 0 and rank_of(report, 1)["runs"][0]["path"] == samples.run_name(1)


def test_gzipped_torch_trace_is_read(tmp_path, capsys):
    import gzip

    path = torch_trace(tmp_path, rank=2, start=1, end=3)
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)
    code, report = check_json(capsys, tmp_path)
    assert code == 0 and rank_of(report, 2)["runs"][0]["steps"] == [1, 2]


def test_window_the_manager_stopped_early_expects_only_what_it_recorded(tmp_path, capsys):
    path = torch_trace(tmp_path, rank=0, start=5, end=7)
    samples.write_manifest(tmp_path, 0, backend="torch", selected_ranks=[0], windows=[
        {"start": 5, "end": 9, "dir": ".", "status": "complete", "iterations_recorded": [5, 6],
         "stopped_early": "--profile-max-gb", "files": [os.path.basename(path)]}])
    code, report = check_json(capsys, tmp_path)
    assert code == 0 and "stopped early (--profile-max-gb)" in warnings(rank_of(report, 0))


@pytest.mark.parametrize("rank_id", ["²", "٣"])
def test_a_non_ascii_digit_rank_in_profiler_info_is_a_verdict_not_a_crash(pristine, tmp_path,
                                                                           capsys, rank_id):
    # str.isdigit() is true for "²" (and "٣" is a digit int() reads): found by the hypothesis
    # test above; a rank_id is ASCII digits or no rank.
    root = tmp_path / "odd"
    shutil.copytree(pristine, root)
    with open(root / samples.run_name(0) / "profiler_info_0.json", "w") as handle:
        json.dump({"rank_id": rank_id}, handle)
    code, out, err = check(capsys, root, "--json")
    assert code in (0, 1) and "Traceback" not in err
    assert all(r["verdict"] in VERDICTS for r in json.loads(out)["ranks"])
