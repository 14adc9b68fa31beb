"""Specification of the fake torch_npu used to test the NPU backend without an NPU.

Runs standalone: `python -m pytest tests/unit/project/test_fake_torch_npu.py`. Each test imports
a fresh copy of the fake for the wheel it needs (the version is fixed at import time).
"""

import csv
import inspect
import json
import os
import re
import sqlite3
import sys
import time

import pytest
import torch

# tests/fakes goes on sys.path only while a test loads the fake (load_fake_torch_npu), and off
# again after it (clean_env): on it from collection on, it made torch_npu importable to every
# later test of the worker (show-config's "backend auto" then chose the fake).
from fakes.loader import (FAKES_DIR, VERSION_ENV, load_fake_torch_npu,
                          unload_fake_torch_npu)

VERSIONS = ("2.6.0", "2.7.1", "2.14.0")
STAMP = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] "
RUN_DIR = re.compile(r"^(?P<worker>.+)_(?P<pid>\d+)_(?P<stamp>\d{17})_ascend_pt$")
ENV_KNOBS = ("RANK", "TORCH_NPU_DISABLED_WARNING", "TORCH_NPU_WARNING_DISABLE", "ASCEND_WORK_PATH",
             "FAKE_TORCH_NPU_FAIL", "FAKE_TORCH_NPU_PARSE_DELAY_S", VERSION_ENV)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ENV_KNOBS:
        monkeypatch.delenv(name, raising=False)
    yield
    analysis = sys.modules.get("torch_npu.profiler.analysis")
    if analysis is not None:
        analysis.wait_for_async_parses(timeout=60)
    # Later test modules must not inherit whichever wheel this test loaded, nor find one.
    unload_fake_torch_npu()
    while FAKES_DIR in sys.path:
        sys.path.remove(FAKES_DIR)


@pytest.fixture
def load(monkeypatch):
    def _load(version):
        module = load_fake_torch_npu(version)
        monkeypatch.setenv(VERSION_ENV, version)  # restored by monkeypatch at teardown
        return module
    return _load


def line(level: str, message: str) -> str:
    return STAMP + re.escape(f"[{level}] [{os.getpid()}] profiler.py: {message}")


def has_line(text: str, level: str, message: str) -> bool:
    return re.search(line(level, message), text) is not None


def tiny_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def train_steps(prof, steps: int, model=None) -> None:
    model = model or tiny_model()
    for _ in range(steps):
        model(torch.randn(4, 8)).sum().backward()
        prof.step()


def run_dirs(parent) -> list:
    return sorted(os.path.join(parent, name) for name in os.listdir(parent) if name.endswith("_ascend_pt"))


def read_csv(path) -> list:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def record_window(npu, out_dir, *, steps=8, step_num=None, schedule=None, handler_kwargs=None, **profile_kwargs):
    schedule = schedule or npu.profiler.schedule(wait=1, warmup=1, active=2, repeat=1, skip_first=1)
    prof = npu.profiler.profile(
        schedule=schedule,
        on_trace_ready=npu.profiler.tensorboard_trace_handler(str(out_dir), **(handler_kwargs or {})),
        **profile_kwargs)
    if step_num is not None:
        prof.step_num = step_num
    prof.start()
    train_steps(prof, steps)
    prof.stop()
    return prof


# ---------------------------------------------------------------------------------------------
# Signatures and exports
# ---------------------------------------------------------------------------------------------

KW = inspect.Parameter.KEYWORD_ONLY
POS = inspect.Parameter.POSITIONAL_OR_KEYWORD


def _profile_params(version):
    params = [("activities", None), ("schedule", None), ("on_trace_ready", None), ("record_shapes", False),
              ("profile_memory", False), ("with_stack", False), ("with_flops", False), ("with_modules", False),
              ("experimental_config", None)]
    if version == "2.14.0":
        params += [("execution_trace_observer", None), ("custom_trace_id_callback", None)]
    return [(name, KW, default) for name, default in params + [("use_cuda", None)]]


def _kineto_params(version):
    params = [("activities", None), ("record_shapes", False), ("profile_memory", False), ("with_stack", False),
              ("with_flops", False), ("with_modules", False), ("experimental_config", None)]
    if version == "2.14.0":
        params.append(("custom_trace_id_callback", None))
    return [(name, KW, default) for name, default in params]


def _schedule_params(version):
    params = [("wait", POS, inspect.Parameter.empty), ("active", POS, inspect.Parameter.empty), ("warmup", POS, 0),
              ("repeat", POS, 0), ("skip_first", POS, 0)]
    return params + ([("skip_first_wait", POS, 0)] if version == "2.14.0" else [])


def _experimental_params(version):
    aic = "ACL_AICORE_PIPE_UTILIZATION" if version == "2.14.0" else "ACL_AICORE_NONE"
    params = [("profiler_level", "Level0"), ("aic_metrics", aic), ("l2_cache", False), ("msprof_tx", False)]
    if version != "2.6.0":
        params.append(("mstx", False))
    params += [("data_simplification", True), ("record_op_args", False), ("op_attr", False),
               ("gc_detect_threshold", None), ("export_type", "text" if version == "2.14.0" else None),
               ("host_sys", None), ("mstx_domain_include", None), ("mstx_domain_exclude", None),
               ("sys_io", False), ("sys_interconnection", False)]
    return [(name, POS, default) for name, default in params]


def _shape(callable_obj):
    return [(p.name, p.kind, p.default) for p in inspect.signature(callable_obj).parameters.values()]


@pytest.mark.parametrize("version", VERSIONS)
def test_public_signatures_match_the_wheel(load, version):
    npu = load(version)
    prof = npu.profiler

    assert _shape(prof.profile) == _profile_params(version)
    assert _shape(prof._KinetoProfile) == _kineto_params(version)
    assert _shape(prof.schedule) == _schedule_params(version)
    assert _shape(prof._ExperimentalConfig) == _experimental_params(version)
    assert _shape(prof.tensorboard_trace_handler) == [
        ("dir_name", POS, None), ("worker_name", POS, None), ("analyse_flag", POS, True), ("async_mode", POS, False)]
    assert _shape(prof.profiler.analyse) == [
        ("profiler_path", POS, inspect.Parameter.empty), ("max_process_number", POS, (os.cpu_count() or 2) // 2),
        ("export_type", POS, None)]


@pytest.mark.parametrize("version", VERSIONS)
def test_profiler_package_exports_what_the_real_all_lists_and_hides_analyse(load, version):
    prof = load(version).profiler

    assert set(prof.__all__) == {
        "profile", "ProfilerActivity", "supported_activities", "tensorboard_trace_handler", "schedule",
        "ProfilerAction", "_ExperimentalConfig", "supported_profiler_level", "supported_ai_core_metrics",
        "supported_export_type", "ProfilerLevel", "AiCMetrics", "ExportType", "HostSystem"}
    assert not hasattr(prof, "analyse")
    assert callable(prof.profiler.analyse)
    assert prof._KinetoProfile is prof.profiler._KinetoProfile
    assert [a.name for a in prof.ProfilerAction] == ["NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"]
    assert {str(a) for a in prof.supported_activities()} == {"ProfilerActivity.CPU", "ProfilerActivity.NPU"}


@pytest.mark.parametrize("version", VERSIONS)
def test_constant_classes_hold_the_strings_written_to_profiler_info(load, version):
    prof = load(version).profiler

    assert prof.ProfilerLevel.Level_none == "Level_none" and prof.ProfilerLevel.Level2 == "Level2"
    assert prof.AiCMetrics.AiCoreNone == "ACL_AICORE_NONE"
    assert prof.AiCMetrics.MemoryL0 == "ACL_AICORE_L0B_AND_WIDTH"
    assert (prof.ExportType.Text, prof.ExportType.Db) == ("text", "db")
    assert prof.HostSystem.OSRT == "osrt"
    assert hasattr(prof.HostSystem, "NUMA") == (version == "2.14.0")
    assert len(prof.supported_ai_core_metrics()) == 9


def test_unknown_mstx_keyword_raises_type_error_on_2_6_0_only(load):
    with pytest.raises(TypeError, match="mstx"):
        load("2.6.0").profiler._ExperimentalConfig(mstx=True)
    assert load("2.7.1").profiler._ExperimentalConfig(mstx=True)._mstx is True


@pytest.mark.parametrize("version", ["2.6.0", "2.7.1"])
def test_skip_first_wait_raises_type_error_before_2_11(load, version):
    with pytest.raises(TypeError, match="skip_first_wait"):
        load(version).profiler.schedule(wait=1, active=1, skip_first_wait=1)


def test_skip_first_wait_skips_the_first_wait_on_2_14(load):
    prof = load("2.14.0").profiler
    actions = prof.schedule(wait=2, active=1, warmup=1, repeat=2, skip_first_wait=1)

    assert [actions(step).name for step in range(5)] == [
        "WARMUP", "RECORD_AND_SAVE", "NONE", "NONE", "WARMUP"]


def test_profile_rejects_keywords_of_newer_wheels(load):
    prof = load("2.7.1").profiler

    with pytest.raises(TypeError, match="custom_trace_id_callback"):
        prof.profile(custom_trace_id_callback=lambda: "id")


# ---------------------------------------------------------------------------------------------
# Console output and normalisation
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["2.6.0", "2.7.1"])
def test_default_experimental_config_warns_about_export_type_before_2_10(load, capsys, version):
    config = load(version).profiler._ExperimentalConfig()

    out = capsys.readouterr().out
    assert has_line(out, "WARNING", "Invalid parameter export_type: None, reset it to text.")
    assert config._export_type == ["text"] and config._aic_metrics == "ACL_AICORE_NONE"


def test_default_experimental_config_resets_pipe_utilization_at_level0_on_2_14(load, capsys):
    config = load("2.14.0").profiler._ExperimentalConfig()

    out = capsys.readouterr().out
    assert has_line(out, "WARNING",
                    "Please use level1 or level2 if you want to collect aic metrics, reset aic metrics to None!")
    assert "export_type" not in out
    assert config._aic_metrics == "ACL_AICORE_NONE"


@pytest.mark.parametrize("version, expected", [("2.6.0", "ACL_AICORE_PIPE_UTILIZATION"),
                                               ("2.7.1", "ACL_AICORE_PIPE_UTILIZATION"),
                                               ("2.14.0", "ACL_AICORE_NONE")])
def test_level1_with_aicore_none_is_silently_upgraded_only_before_2_10(load, capsys, version, expected):
    prof = load(version).profiler
    config = prof._ExperimentalConfig(profiler_level=prof.ProfilerLevel.Level1,
                                      aic_metrics=prof.AiCMetrics.AiCoreNone, export_type=["text"])

    assert config._aic_metrics == expected
    assert "aic" not in capsys.readouterr().out


@pytest.mark.parametrize("version", VERSIONS)
def test_level0_with_aic_metrics_warns_and_resets_to_none(load, capsys, version):
    prof = load(version).profiler
    config = prof._ExperimentalConfig(aic_metrics=prof.AiCMetrics.PipeUtilization, export_type="text")

    assert config._aic_metrics == "ACL_AICORE_NONE"
    assert has_line(capsys.readouterr().out, "WARNING",
                    "Please use level1 or level2 if you want to collect aic metrics, reset aic metrics to None!")


@pytest.mark.parametrize("version", VERSIONS)
def test_op_attr_without_db_export_is_reset_with_a_warning(load, capsys, version):
    config = load(version).profiler._ExperimentalConfig(op_attr=True, export_type=["text"])

    assert config._op_attr is False
    assert has_line(capsys.readouterr().out, "WARNING", "op_attr switch is invalid with export type set as text.")


@pytest.mark.parametrize("version", ["2.7.1", "2.14.0"])
def test_level_none_forces_mstx_from_2_7_1(load, capsys, version):
    prof = load(version).profiler
    config = prof._ExperimentalConfig(profiler_level=prof.ProfilerLevel.Level_none, export_type="text")

    assert config._mstx is True
    assert has_line(capsys.readouterr().out, "WARNING",
                    "Parameter mstx or msprof_tx must be True if profiler_level is set to Level_none.")


def test_level_none_has_no_mstx_check_on_2_6_0(load, capsys):
    prof = load("2.6.0").profiler
    config = prof._ExperimentalConfig(profiler_level=prof.ProfilerLevel.Level_none, export_type="text")

    assert "_mstx" not in vars(config)
    assert "mstx" not in capsys.readouterr().out


def test_invalid_bool_wording_follows_the_wheel(load, capsys):
    load("2.6.0").profiler._ExperimentalConfig(l2_cache="yes", export_type="text")
    assert has_line(capsys.readouterr().out, "WARNING",
                    "Invalid parameter l2_cache, which must be of boolean type, reset it to False.")
    load("2.14.0").profiler._ExperimentalConfig(l2_cache="yes", aic_metrics="ACL_AICORE_NONE")
    assert has_line(capsys.readouterr().out, "WARNING",
                    "Invalid parameter l2_cache, which must be of bool type, reset it to False.")


@pytest.mark.parametrize("env", [{"RANK": "1"}, {"TORCH_NPU_DISABLED_WARNING": "1"}])
def test_warnings_are_hidden_but_errors_and_infos_are_printed(load, capsys, monkeypatch, env):
    prof = load("2.7.1").profiler
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    prof._ExperimentalConfig()
    prof.tensorboard_trace_handler("/tmp/bad:path")
    out = capsys.readouterr().out

    assert "[WARNING]" not in out
    assert has_line(out, "ERROR", "Call tensorboard_trace_handler failed. Exception: Invalid input path: ")


def test_rank_zero_still_prints_warnings(load, capsys, monkeypatch):
    prof = load("2.7.1").profiler
    monkeypatch.setenv("RANK", "0")

    prof._ExperimentalConfig()

    assert has_line(capsys.readouterr().out, "WARNING", "Invalid parameter export_type: None, reset it to text.")


@pytest.mark.parametrize("version", VERSIONS)
def test_schedule_follows_the_reference_sequence(load, version):
    prof = load(version).profiler
    actions = prof.schedule(wait=1, warmup=1, active=2, repeat=1, skip_first=1)

    assert [actions(step).name for step in range(8)] == [
        "NONE", "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE", "NONE", "NONE", "NONE"]


def test_schedule_resets_invalid_parameters_with_warnings(load, capsys):
    prof = load("2.7.1").profiler
    actions = prof.schedule(wait=-1, active=0, skip_first="2")

    out = capsys.readouterr().out
    for message in ("Invalid parameter wait, reset it to 0.", "Invalid parameter active, reset it to 1.",
                    "Invalid parameter skip_first, reset it to 0.",
                    "Profiler won't be using warmup, this can skew profiler results"):
        assert has_line(out, "WARNING", message)
    assert vars(actions) == {"wait": 0, "active": 1, "warmup": 0, "repeat": 0, "skip_first": 0}
    with pytest.raises(ValueError, match="step"):
        actions(-1)


# ---------------------------------------------------------------------------------------------
# A real window of a tiny model
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_real_window_writes_the_ascend_pt_tree(load, tmp_path, monkeypatch, version):
    npu = load(version)
    monkeypatch.setenv("RANK", "0")

    record_window(npu, tmp_path, handler_kwargs={"worker_name": "rank0"})

    [run] = run_dirs(tmp_path)
    match = RUN_DIR.match(os.path.basename(run))
    assert match and match["worker"] == "rank0" and int(match["pid"]) == os.getpid()
    with open(os.path.join(run, "profiler_info_0.json"), encoding="utf-8") as handle:
        info = json.load(handle)
    assert info["rank_id"] == "0"
    assert info["config"]["common_config"]["schedule"]["active"] == 2
    assert info["config"]["experimental_config"]["_profiler_level"] == "Level0"
    assert info["torch_npu_version"].startswith(version)
    assert {"start_info", "end_info", "cann_version"} <= set(info)
    assert any(re.match(r"^PROF_\d{6}_\d{17}_[A-Z]{16}$", name) for name in os.listdir(run))
    assert os.listdir(os.path.join(run, "FRAMEWORK")) and os.listdir(os.path.join(run, "logs"))
    with open(os.path.join(run, "profiler_metadata.json"), encoding="utf-8") as handle:
        metadata = json.load(handle)
    assert "ENV_VARIABLES" in metadata and ("trace_id" in metadata) == (version == "2.14.0")

    output = os.path.join(run, "ASCEND_PROFILER_OUTPUT")
    assert os.path.exists(os.path.join(output, "analyse.done")) == (version == "2.14.0")
    kernel_rows = read_csv(os.path.join(output, "kernel_details.csv"))
    block = "Block Num" if version == "2.14.0" else "Block Dim"
    assert kernel_rows[0][:9] == ["Step Id", "Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)",
                                  "Duration(us)", "Wait Time(us)", block]
    assert {row[0] for row in kernel_rows[1:]} == {"3", "4"}
    step_rows = read_csv(os.path.join(output, "step_trace_time.csv"))
    assert step_rows[0][0:2] == ["Device_id", "Step"] and step_rows[0][-1] == "Preparing"
    assert [row[1] for row in step_rows[1:]] == ["3", "4"]
    assert not os.path.exists(os.path.join(output, "op_statistic.csv"))


def test_trace_view_is_a_chrome_event_array_with_steps_and_hardware(load, tmp_path):
    npu = load("2.7.1")

    record_window(npu, tmp_path)

    [run] = run_dirs(tmp_path)
    with open(os.path.join(run, "ASCEND_PROFILER_OUTPUT", "trace_view.json"), encoding="utf-8") as handle:
        events = json.load(handle)
    assert isinstance(events, list)
    processes = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert processes == {"Python", "Ascend Hardware", "Overlap Analysis"}
    steps = sorted(e["name"] for e in events if e["name"].startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#3", "ProfilerStep#4"]
    cpu_ops = [e for e in events if e.get("cat") == "cpu_op"]
    assert cpu_ops and all(re.fullmatch(r"\d+\.\d{3}", e["ts"]) for e in cpu_ops)
    assert any(e["name"] == "Computing" for e in events)


def test_preset_step_num_labels_steps_from_that_iteration(load, tmp_path):
    npu = load("2.7.1")
    schedule = npu.profiler.schedule(wait=0, warmup=1, active=2, repeat=1, skip_first=5)

    prof = record_window(npu, tmp_path, step_num=5, schedule=schedule, steps=4)

    assert prof.step_num == 9
    [run] = run_dirs(tmp_path)
    kernel_rows = read_csv(os.path.join(run, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"))
    assert {row[0] for row in kernel_rows[1:]} == {"6", "7"}


@pytest.mark.parametrize("version", ["2.6.0", "2.14.0"])
def test_level1_writes_full_kernel_headers_and_statistics(load, tmp_path, version):
    npu = load(version)
    prof = npu.profiler
    config = prof._ExperimentalConfig(profiler_level=prof.ProfilerLevel.Level1, export_type=["text"])

    record_window(npu, tmp_path, experimental_config=config)

    [run] = run_dirs(tmp_path)
    output = os.path.join(run, "ASCEND_PROFILER_OUTPUT")
    header = read_csv(os.path.join(output, "kernel_details.csv"))[0]
    for column in ("Model ID", "Task ID", "Stream ID", "OP State", "HF32 Eligible", "Input Shapes",
                   "aicore_time(us)", "aic_mac_time(us)", "aiv_vec_time(us)"):
        assert column in header
    assert read_csv(os.path.join(output, "op_statistic.csv"))[0][1:3] == ["OP Type", "Core Type"]
    assert read_csv(os.path.join(output, "api_statistic.csv"))[0][2] == "API Name"


def test_no_rank_gives_profiler_info_without_rank_id(load, tmp_path):
    npu = load("2.7.1")

    record_window(npu, tmp_path)

    [run] = run_dirs(tmp_path)
    with open(os.path.join(run, "profiler_info.json"), encoding="utf-8") as handle:
        assert "rank_id" not in json.load(handle)


def test_metadata_is_written_once_and_oversized_values_are_skipped(load, tmp_path, capsys):
    npu = load("2.7.1")
    prof = npu.profiler.profile(schedule=npu.profiler.schedule(wait=0, active=1, warmup=1, repeat=1),
                                on_trace_ready=npu.profiler.tensorboard_trace_handler(str(tmp_path)))
    assert prof.add_metadata("job", "gpt") is None
    prof.add_metadata_json("distributed_args", json.dumps({"rank": 0, "world_size": 8}))
    prof.add_metadata("too_long", "x" * 4097)

    with prof:
        train_steps(prof, 3)

    assert has_line(capsys.readouterr().out, "WARNING", "Invalid input key or value. Skip this metadata.")
    [run] = run_dirs(tmp_path)
    with open(os.path.join(run, "profiler_metadata.json"), encoding="utf-8") as handle:
        metadata = json.load(handle)
    assert metadata["job"] == "gpt" and metadata["distributed_args"]["world_size"] == 8
    assert "too_long" not in metadata


def test_db_export_writes_sqlite_with_framework_and_device_tables(load, tmp_path, monkeypatch):
    npu = load("2.14.0")
    monkeypatch.setenv("RANK", "3")
    config = npu.profiler._ExperimentalConfig(export_type=[npu.profiler.ExportType.Db])

    record_window(npu, tmp_path, experimental_config=config)

    [run] = run_dirs(tmp_path)
    output = os.path.join(run, "ASCEND_PROFILER_OUTPUT")
    assert sorted(os.listdir(output)) == ["analyse.done", "analysis.db", "ascend_pytorch_profiler_3.db"]
    db = sqlite3.connect(os.path.join(output, "ascend_pytorch_profiler_3.db"))
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"STRING_IDS", "TASK", "COMPUTE_TASK_INFO", "STEP_TIME", "META_DATA", "RANK_DEVICE_MAP",
                "PYTORCH_API"} <= tables
        assert [row[0] for row in db.execute("SELECT id FROM STEP_TIME ORDER BY id")] == [3, 4]
        assert db.execute("SELECT rankId FROM RANK_DEVICE_MAP").fetchone() == (3,)
        assert db.execute("SELECT COUNT(*) FROM TASK").fetchone()[0] > 0
    finally:
        db.close()


@pytest.mark.parametrize("simplify, kept", [(True, False), (False, True)])
def test_data_simplification_decides_whether_cann_exports_stay(load, tmp_path, simplify, kept):
    npu = load("2.7.1")
    config = npu.profiler._ExperimentalConfig(export_type="text", data_simplification=simplify)

    record_window(npu, tmp_path, experimental_config=config)

    [run] = run_dirs(tmp_path)
    [cann] = [os.path.join(run, n) for n in os.listdir(run) if n.startswith("PROF_")]
    assert os.path.isdir(os.path.join(cann, "mindstudio_profiler_output")) == kept
    assert os.path.isdir(os.path.join(cann, "device_0", "data"))
    assert not os.path.exists(os.path.join(cann, "device_0", "sqlite"))


def test_profile_memory_writes_memory_views(load, tmp_path):
    npu = load("2.7.1")

    record_window(npu, tmp_path, profile_memory=True)

    [run] = run_dirs(tmp_path)
    output = os.path.join(run, "ASCEND_PROFILER_OUTPUT")
    assert read_csv(os.path.join(output, "memory_record.csv"))[0][-1] == "Device Type"
    assert read_csv(os.path.join(output, "operator_memory.csv"))[0][0:2] == ["Name", "Size(KB)"]


# ---------------------------------------------------------------------------------------------
# State machine and handler
# ---------------------------------------------------------------------------------------------

def test_stop_during_warmup_deletes_the_run_dir_with_a_warning(load, tmp_path, capsys):
    npu = load("2.7.1")
    prof = npu.profiler.profile(schedule=npu.profiler.schedule(wait=0, warmup=2, active=1),
                                on_trace_ready=npu.profiler.tensorboard_trace_handler(str(tmp_path)))

    prof.start()
    assert len(run_dirs(tmp_path)) == 1
    train_steps(prof, 1)
    prof.stop()

    assert run_dirs(tmp_path) == []
    assert has_line(capsys.readouterr().out, "WARNING", "Incorrect schedule: Stop profiler while current state is "
                    "WARMUP which will result in empty parsed data.")


def test_stop_during_record_saves_with_a_warning_and_step_after_stop_warns(load, tmp_path, capsys):
    npu = load("2.7.1")
    prof = npu.profiler.profile(on_trace_ready=npu.profiler.tensorboard_trace_handler(str(tmp_path)))
    assert prof.current_action == npu.profiler.ProfilerAction.RECORD

    prof.start()
    train_steps(prof, 2)
    prof.stop()
    prof.step()

    out = capsys.readouterr().out
    assert has_line(out, "WARNING", "Incorrect schedule: Stop profiler while current state is RECORD which may "
                    "result in incomplete parsed data.")
    assert has_line(out, "WARNING", "Profiler is stopped, step takes no effect!")
    [run] = run_dirs(tmp_path)
    # Without a schedule there are no ProfilerStep markers, hence no Step Id column.
    assert read_csv(os.path.join(run, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"))[0][0] == "Device_id"


def test_repeat_zero_opens_a_new_run_dir_every_cycle(load, tmp_path):
    npu = load("2.7.1")

    record_window(npu, tmp_path, schedule=npu.profiler.schedule(wait=0, warmup=1, active=1), steps=4)

    assert len(run_dirs(tmp_path)) == 2


def test_path_with_colon_makes_the_handler_none_and_falls_back_to_export_only(load, tmp_path, monkeypatch, capsys):
    npu = load("2.7.1")
    monkeypatch.chdir(tmp_path)

    handler = npu.profiler.tensorboard_trace_handler(str(tmp_path / "bad:dir"))

    assert handler is None
    out = capsys.readouterr().out
    assert has_line(out, "ERROR", "Call tensorboard_trace_handler failed. Exception: Invalid input path: ")
    assert "ERR00001 PTA invalid parameter" in out
    prof = npu.profiler.profile(on_trace_ready=handler)
    with prof:
        train_steps(prof, 1)
    assert len(run_dirs(tmp_path / "export_only_prof_dir")) == 1
    assert not os.path.exists(os.path.join(run_dirs(tmp_path / "export_only_prof_dir")[0], "ASCEND_PROFILER_OUTPUT"))


def test_the_last_handler_built_decides_the_directory(load, tmp_path):
    npu = load("2.7.1")
    first = npu.profiler.tensorboard_trace_handler(str(tmp_path / "first"))
    npu.profiler.tensorboard_trace_handler(str(tmp_path / "second"))

    prof = npu.profiler.profile(on_trace_ready=first)
    with prof:
        train_steps(prof, 1)

    assert not (tmp_path / "first").exists()
    assert len(run_dirs(tmp_path / "second")) == 1


@pytest.mark.parametrize("version, utc", [("2.6.0", True), ("2.7.1", False)])
def test_run_dir_timestamp_is_utc_only_on_2_6_0(load, tmp_path, monkeypatch, version, utc):
    npu = load(version)
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    try:
        before = time.time()
        prof = npu.profiler.profile(on_trace_ready=npu.profiler.tensorboard_trace_handler(str(tmp_path)))
        prof.start()
        prof.stop()
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    stamp = RUN_DIR.match(os.path.basename(run_dirs(tmp_path)[0]))["stamp"]
    expected = time.gmtime(before) if utc else time.gmtime(before + 8 * 3600)
    assert stamp[:10] == time.strftime("%Y%m%d%H", expected)


# ---------------------------------------------------------------------------------------------
# Parsing modes
# ---------------------------------------------------------------------------------------------

def test_async_parse_returns_early_and_completes_in_the_background(load, tmp_path, monkeypatch, capsys):
    npu = load("2.14.0")
    monkeypatch.setenv("FAKE_TORCH_NPU_PARSE_DELAY_S", "1.0")

    record_window(npu, tmp_path, handler_kwargs={"async_mode": True})

    [run] = run_dirs(tmp_path)
    done = os.path.join(run, "ASCEND_PROFILER_OUTPUT", "analyse.done")
    assert not os.path.exists(done)  # stop() returned while the parse was still sleeping
    assert npu.profiler.analysis.wait_for_async_parses(timeout=30)
    assert os.path.exists(done)
    assert os.path.exists(os.path.join(run, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"))
    assert has_line(capsys.readouterr().out, "INFO", f"Start parsing profiling data in async mode at: {run}")


def test_sync_parse_blocks_for_the_injected_delay(load, tmp_path, monkeypatch):
    npu = load("2.7.1")
    monkeypatch.setenv("FAKE_TORCH_NPU_PARSE_DELAY_S", "0.4")

    started = time.monotonic()
    record_window(npu, tmp_path)

    assert time.monotonic() - started >= 0.4


@pytest.mark.parametrize("version", ["2.7.1", "2.14.0"])
def test_offline_analyse_parses_a_directory_left_unparsed(load, tmp_path, capsys, version):
    npu = load(version)
    record_window(npu, tmp_path, handler_kwargs={"analyse_flag": False})
    [run] = run_dirs(tmp_path)
    assert not os.path.exists(os.path.join(run, "ASCEND_PROFILER_OUTPUT"))

    from torch_npu.profiler.profiler import analyse

    assert analyse(str(tmp_path)) is None

    assert os.path.exists(os.path.join(run, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"))
    out = capsys.readouterr().out
    assert re.search(line("INFO", "All profiling data parsed in a total time of "), out)


def test_export_chrome_trace_requires_a_json_name_before_2_11(load, tmp_path, monkeypatch, capsys):
    npu = load("2.7.1")
    monkeypatch.chdir(tmp_path)
    prof = npu.profiler.profile()
    with prof:
        train_steps(prof, 1)

    prof.export_chrome_trace(str(tmp_path / "trace.txt"))
    prof.export_chrome_trace(str(tmp_path / "trace.json"))

    assert has_line(capsys.readouterr().out, "ERROR", "Call export_chrome_trace failed. Exception: "
                    "Invalid parameter output_path, which must be a json file.")
    with open(tmp_path / "trace.json", encoding="utf-8") as handle:
        assert isinstance(json.load(handle), list)


# ---------------------------------------------------------------------------------------------
# Failure injection
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("point", ["start", "stop", "step"])
def test_injected_failures_print_the_swallowed_error_and_return_none(load, tmp_path, monkeypatch, capsys, point):
    npu = load("2.7.1")
    prof = npu.profiler.profile(on_trace_ready=npu.profiler.tensorboard_trace_handler(str(tmp_path)))
    monkeypatch.setenv("FAKE_TORCH_NPU_FAIL", point)

    result = getattr(prof, point)()

    assert result is None
    assert has_line(capsys.readouterr().out, "ERROR", f"Call {point} failed. Exception: ")
    monkeypatch.delenv("FAKE_TORCH_NPU_FAIL")
    prof.stop()


def test_injected_stop_failure_loses_the_window_but_leaves_no_running_profiler(load, tmp_path, monkeypatch):
    npu = load("2.7.1")
    prof = npu.profiler.profile(on_trace_ready=npu.profiler.tensorboard_trace_handler(str(tmp_path)))
    prof.start()
    train_steps(prof, 1)
    monkeypatch.setenv("FAKE_TORCH_NPU_FAIL", "stop")

    prof.stop()

    assert not torch._C._autograd._profiler_enabled()
    [run] = run_dirs(tmp_path)
    assert not os.path.exists(os.path.join(run, "profiler_info.json"))


@pytest.mark.parametrize("version", ["2.7.1", "2.14.0"])
def test_injected_parse_failure_omits_kernel_details_and_reports_the_task(load, tmp_path, monkeypatch, capsys,
                                                                          version):
    npu = load(version)
    monkeypatch.setenv("FAKE_TORCH_NPU_FAIL", "parse")

    record_window(npu, tmp_path)

    [run] = run_dirs(tmp_path)
    output = os.path.join(run, "ASCEND_PROFILER_OUTPUT")
    assert not os.path.exists(os.path.join(output, "kernel_details.csv"))
    assert os.path.exists(os.path.join(output, "trace_view.json"))
    assert os.path.exists(os.path.join(output, "analyse.done")) == (version == "2.14.0")
    assert has_line(capsys.readouterr().out, "ERROR", "Task [KernelViewParser] run failed.")
    [log] = [n for n in os.listdir(os.path.join(run, "logs")) if n.endswith("_KernelViewParser.log")]
    with open(os.path.join(run, "logs", log), encoding="utf-8") as handle:
        assert "[ERROR] [AscendProfiler_KernelViewParser:" in handle.read()


def test_injected_finalize_failure_writes_no_profiler_info(load, tmp_path, monkeypatch, capsys):
    npu = load("2.7.1")
    monkeypatch.setenv("FAKE_TORCH_NPU_FAIL", "finalize")

    record_window(npu, tmp_path)

    [run] = run_dirs(tmp_path)
    assert not [n for n in os.listdir(run) if n.startswith("profiler_info")]
    assert has_line(capsys.readouterr().out, "ERROR", "Call step failed. Exception: Profiler finalize failed.")


def test_injected_import_failure_mentions_libhccl(monkeypatch):
    monkeypatch.setenv("FAKE_TORCH_NPU_FAIL", "import")

    with pytest.raises(ImportError, match="libhccl.so"):
        load_fake_torch_npu("2.7.1")


def test_misspelt_failure_point_is_rejected(monkeypatch):
    monkeypatch.setenv("FAKE_TORCH_NPU_FAIL", "stat")

    with pytest.raises(ValueError, match="stat"):
        load_fake_torch_npu("2.7.1")


def test_unknown_version_is_rejected(monkeypatch):
    with pytest.raises(ValueError, match="2.9.9"):
        load_fake_torch_npu("2.9.9")


# ---------------------------------------------------------------------------------------------
# torch_npu.npu and isolation
# ---------------------------------------------------------------------------------------------

def test_npu_module_reports_a_usable_device_without_touching_torch(load):
    npu = load("2.7.1")

    assert npu.npu.is_available() and npu.npu.device_count() == 8
    npu.npu.set_device("npu:3")
    assert npu.npu.current_device() == 3
    npu.npu.synchronize()
    npu.npu._lazy_init()
    assert not hasattr(torch, "npu")
    assert "npu" not in dir(torch.backends)


# ---------------------------------------------------------------------------------------------
# torch_npu.npu.memory: allocator history, snapshots, out-of-memory observers
# (Ascend/pytorch torch_npu/npu/memory.py, csrc/npu/Module.cpp, NPUCachingAllocator.cpp)
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_memory_history_functions_have_the_wheel_signatures(load, version):
    memory = load(version).npu.memory
    newer = version == "2.14.0"

    assert _shape(memory._record_memory_history) == [
        ("enabled", POS, "all"), ("args", inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.empty),
        ("kwargs", inspect.Parameter.VAR_KEYWORD, inspect.Parameter.empty)]
    assert _shape(memory._record_memory_history_impl) == [
        ("enabled", POS, "all"), ("context", POS, "all"), ("stacks", POS, "all"),
        ("max_entries", POS, sys.maxsize), ("device", POS, None)]
    assert _shape(memory._snapshot) == [("device", POS, None)] + (
        [("augment_with_fx_traces", POS, False)] if newer else [])
    assert _shape(memory._dump_snapshot) == [("filename", POS, "dump_snapshot.pickle")] + (
        [("augment_with_fx_traces", POS, False)] if newer else [])
    snapshot = load(version)._C._npu_memorySnapshot
    assert len(inspect.signature(snapshot).parameters) == (1 if newer else 0)


def test_snapshot_holds_the_real_keys_and_a_history_ring_of_max_entries(load):
    npu = load("2.7.1")
    memory = npu.npu.memory
    memory._record_memory_history("all", context="all", stacks="python", max_entries=4)
    first = memory._fake_device_alloc(1000)
    memory._fake_device_alloc(3 << 20)
    memory._fake_device_free(first)

    snapshot = memory._snapshot()

    assert set(snapshot) == {"segments", "device_traces"}
    (trace,) = snapshot["device_traces"]
    assert [e["action"] for e in trace] == ["segment_alloc", "alloc", "free_requested",
                                            "free_completed"]  # the 6 events, newest 4 kept
    assert set(trace[1]) == {"action", "addr", "size", "stream", "pool_id", "frames"}
    assert trace[1]["pool_id"] == (0, 0) and trace[1]["size"] == 3 << 20
    assert trace[1]["frames"][0]["name"] == "test_snapshot_holds_the_real_keys_and_a_history_ring_of_max_entries"
    segment = snapshot["segments"][0]
    assert set(segment) == {"device", "address", "total_size", "allocated_size", "active_size",
                            "requested_size", "stream", "segment_pool_id", "segment_type",
                            "is_expandable", "frames", "blocks"}
    assert {b["state"] for s in snapshot["segments"] for b in s["blocks"]} <= {
        "active_allocated", "inactive"}


def test_history_off_records_nothing_and_clears_the_ring(load):
    memory = load("2.14.0").npu.memory
    memory._record_memory_history("all", max_entries=10)
    memory._fake_device_alloc(1000)
    memory._record_memory_history(None)
    memory._fake_device_alloc(1000)

    assert memory._snapshot()["device_traces"] == [[]]
    assert len(memory._snapshot()["segments"]) == 2  # the state is still there


@pytest.mark.parametrize("version, mode", [("2.7.1", 0o200), ("2.14.0", None)])
def test_dump_snapshot_makes_an_owner_write_only_file_before_2_13(load, tmp_path, version, mode):
    memory = load(version).npu.memory
    path = tmp_path / "dump.pickle"

    memory._dump_snapshot(str(path))

    if mode is not None:
        assert path.stat().st_mode & 0o777 == mode
    else:
        assert path.read_bytes().startswith(b"\x80")


def test_out_of_memory_calls_the_observers_then_raises_out_of_memory_error(load, monkeypatch):
    npu = load("2.7.1")
    monkeypatch.setenv("FAKE_TORCH_NPU_HBM_BYTES", str(64 << 20))
    memory = npu.npu.memory
    memory._record_memory_history("all")
    calls = []
    npu._C._npu_attach_out_of_memory_observer(lambda *args: calls.append(args))
    memory._fake_device_alloc(40 << 20)

    with pytest.raises(torch.OutOfMemoryError, match=r"NPU out of memory\. Tried to allocate 40\.00 MiB"):
        memory._fake_device_alloc(40 << 20)

    assert calls == [(0, 40 << 20, 64 << 20, 24 << 20)]
    assert memory._snapshot()["device_traces"][0][-1]["action"] == "oom"
    assert "device_free" in memory._snapshot()["device_traces"][0][-1]


def test_an_observer_that_raises_replaces_the_out_of_memory_error(load, monkeypatch):
    npu = load("2.14.0")
    monkeypatch.setenv("FAKE_TORCH_NPU_HBM_BYTES", str(8 << 20))

    def observer(*args):
        raise KeyError("observer broke")

    npu._C._npu_attach_out_of_memory_observer(observer)
    with pytest.raises(KeyError, match="observer broke"):
        npu.npu.memory._fake_device_alloc(16 << 20)


# ---------------------------------------------------------------------------------------------
# torch_npu.npu.mstx (torch_npu/npu/mstx.py) and mstx collection
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_mstx_has_each_wheels_functions_and_signatures(load, version):
    mstx = load(version).npu.mstx

    assert _shape(mstx.range_start) == [("message", POS, inspect.Parameter.empty),
                                        ("stream", POS, None), ("domain", POS, "default")]
    assert _shape(mstx.range_end) == [("range_id", POS, inspect.Parameter.empty),
                                      ("domain", POS, "default")]
    assert hasattr(mstx, "range_push") == hasattr(mstx, "annotate") == (version == "2.14.0")
    assert hasattr(load(version).profiler.profile, "_start_step_mstx_range") == (version == "2.14.0")


def test_mstx_range_start_returns_zero_for_an_empty_message(load):
    mstx = load("2.7.1").npu.mstx

    with pytest.warns(UserWarning, match="Invalid message for mstx.range_start"):
        assert mstx.range_start("") == 0


@pytest.mark.parametrize("version", ["2.7.1", "2.14.0"])
def test_mstx_ranges_reach_trace_view_only_while_a_capture_collects_them(load, tmp_path, version):
    npu = load(version)
    mstx = npu.npu.mstx
    mstx.range_end(mstx.range_start("before the capture"))
    experimental = npu.profiler._ExperimentalConfig(profiler_level=npu.profiler.ProfilerLevel.Level_none,
                                                    mstx=True, export_type=[npu.profiler.ExportType.Text])
    prof = npu.profiler.profile(activities=[npu.profiler.ProfilerActivity.NPU],
                                schedule=npu.profiler.schedule(wait=0, warmup=0, active=2, repeat=1),
                                on_trace_ready=npu.profiler.tensorboard_trace_handler(str(tmp_path)),
                                experimental_config=experimental)
    prof.start()
    for step in range(2):
        mstx.range_end(mstx.range_start(f"label {step}"))
        prof.step()
    prof.stop()

    (run,) = run_dirs(tmp_path)
    with open(os.path.join(run, "ASCEND_PROFILER_OUTPUT", "trace_view.json")) as handle:
        names = {e["name"] for e in json.load(handle) if e.get("cat") == "mstx"}
    expected = {"label 0", "label 1"}
    if version == "2.14.0":  # each step is a ProfilerStep#N mstx range of torch_npu's own
        expected |= {"ProfilerStep#0", "ProfilerStep#1"}
    assert names == expected
    assert not os.path.exists(os.path.join(run, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"))


def test_mstx_domain_exclude_leaves_a_domain_out_of_the_capture(load, tmp_path):
    npu = load("2.7.1")
    mstx = npu.npu.mstx
    experimental = npu.profiler._ExperimentalConfig(mstx=True, mstx_domain_exclude=["communication"],
                                                    export_type=[npu.profiler.ExportType.Text])
    prof = npu.profiler.profile(schedule=npu.profiler.schedule(wait=0, warmup=0, active=1, repeat=1),
                                on_trace_ready=npu.profiler.tensorboard_trace_handler(str(tmp_path)),
                                experimental_config=experimental)
    prof.start()
    mstx.range_end(mstx.range_start("kept"))
    mstx.range_end(mstx.range_start("dropped", domain="communication"), domain="communication")
    prof.step()
    prof.stop()

    (run,) = run_dirs(tmp_path)
    with open(os.path.join(run, "ASCEND_PROFILER_OUTPUT", "trace_view.json")) as handle:
        names = {e["name"] for e in json.load(handle) if e.get("cat") == "mstx"}
    assert names == {"kept"}
