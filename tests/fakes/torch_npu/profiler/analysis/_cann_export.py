"""Pretend `msprof --export`: write CANN's own summaries under PROF_*/ from the raw device data.

torch_npu builds kernel_details.csv by renaming the columns of CANN's op_summary_*.csv,
so the fake writes that intermediate file first and the kernel view reads it back.
The directories created here are what data_simplification later deletes.
"""

import csv
import os
import shutil
import time
import zlib

from torch_npu import _version
from .. import _constants as C
from ._run_data import RunData, ns_to_us, ns_to_us_str

OUTPUT_SUBDIR = "mindstudio_profiler_output"
EXPORT_DIRS = ("sqlite", "summary", "timeline")
MODEL_ID_INVALID = "4294967295"

_AIC_METRIC_COLUMNS = {
    C.AIC_PIPE_UTILIZATION: (
        ["mac_time(us)", "mac_ratio", "scalar_time(us)", "scalar_ratio", "mte1_time(us)", "mte1_ratio",
         "mte2_time(us)", "mte2_ratio", "fixpipe_time(us)", "fixpipe_ratio", "icache_miss_rate"],
        ["vec_time(us)", "vec_ratio", "scalar_time(us)", "scalar_ratio", "mte2_time(us)", "mte2_ratio",
         "mte3_time(us)", "mte3_ratio", "icache_miss_rate"]),
    C.AIC_ARITHMETIC_UTILIZATION: (
        ["mac_fp16_ratio", "mac_int8_ratio", "cube_fops"],
        ["vec_fp32_ratio", "vec_fp16_ratio", "vec_int32_ratio", "vector_fops"]),
    C.AIC_MEMORY: (
        ["main_mem_read_bw(GB/s)", "main_mem_write_bw(GB/s)", "l2_read_bw(GB/s)", "l2_write_bw(GB/s)"],
        ["main_mem_read_bw(GB/s)", "main_mem_write_bw(GB/s)", "l2_read_bw(GB/s)", "l2_write_bw(GB/s)"]),
    C.AIC_MEMORY_L0: (
        ["l0a_read_bw(GB/s)", "l0a_write_bw(GB/s)", "l0b_read_bw(GB/s)", "l0b_write_bw(GB/s)",
         "l0c_read_bw_cube(GB/s)", "l0c_write_bw_cube(GB/s)"],
        ["l0c_read_bw(GB/s)", "l0c_write_bw(GB/s)"]),
    C.AIC_MEMORY_UB: (
        ["ub_read_bw_scalar(GB/s)", "ub_write_bw_scalar(GB/s)"],
        ["ub_read_bw_vector(GB/s)", "ub_write_bw_vector(GB/s)"]),
    C.AIC_RESOURCE_CONFLICT_RATIO: (
        ["vec_bankgroup_cflt_ratio", "vec_bank_cflt_ratio", "vec_resc_cflt_ratio"],
        ["vec_bankgroup_cflt_ratio", "vec_bank_cflt_ratio", "vec_resc_cflt_ratio"]),
    C.AIC_L2_CACHE: (["write_cache_hit", "write_cache_miss_allocate", "r0_read_cache_hit"],
                     ["write_cache_hit", "write_cache_miss_allocate", "r0_read_cache_hit"]),
    C.AIC_MEMORY_ACCESS: (["read_main_memory_datas(KB)", "write_main_memory_datas(KB)"],
                          ["read_main_memory_datas(KB)", "write_main_memory_datas(KB)"]),
}


def block_columns() -> tuple:
    name = _version.KERNEL_BLOCK_COLUMN
    return name, f"Mix {name}"


def op_summary_headers(aic_metrics: str) -> list:
    block, mix_block = block_columns()
    headers = ["Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State", "Task Type",
               "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)", block, mix_block,
               "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
               "Output Data Types", "Output Formats", "Context ID"]
    if aic_metrics in _AIC_METRIC_COLUMNS:
        aic_cols, aiv_cols = _AIC_METRIC_COLUMNS[aic_metrics]
        headers += ["aicore_time(us)", "aic_total_cycles"] + [f"aic_{col}" for col in aic_cols]
        headers += ["aiv_time(us)", "aiv_total_cycles"] + [f"aiv_{col}" for col in aiv_cols]
        if aic_metrics == C.AIC_PIPE_UTILIZATION:
            headers.append("cube_utilization(%)")
    return headers


def _fraction(text: str) -> float:
    return (zlib.crc32(text.encode("utf-8")) % 1000) / 1000


def _metric_values(kernel: dict, aic_metrics: str) -> list:
    if aic_metrics not in _AIC_METRIC_COLUMNS:
        return []
    aic_cols, aiv_cols = _AIC_METRIC_COLUMNS[aic_metrics]
    duration = kernel["dur_ns"] / 1000
    on_cube = kernel["task_type"] == "AI_CORE"

    def unit_values(cols, active):
        values = []
        for col in cols:
            share = _fraction(kernel["name"] + col) if active else 0.0
            values.append(round(share * duration, 3) if "time" in col else round(share, 3))
        return values

    values = [round(duration, 3) if on_cube else 0, int(duration * 1800) if on_cube else 0]
    values += unit_values(aic_cols, on_cube)
    values += [0 if on_cube else round(duration, 3), 0 if on_cube else int(duration * 1800)]
    values += unit_values(aiv_cols, not on_cube)
    if aic_metrics == C.AIC_PIPE_UTILIZATION:
        values.append(round(_fraction(kernel["name"]) * 100, 3) if on_cube else 0)
    return values


def op_summary_rows(data: RunData) -> list:
    """One row per kernel; at Level0 newer CANN leaves type, core and shapes as N/A (task-time l0)."""
    level0_na = _version.LEVEL0_TASK_INFO_IS_NA and data.config.level == C.LEVEL0
    previous_end, rows = {}, []
    for kernel in sorted(data.kernels, key=lambda k: k["start_ns"]):
        stream = kernel["stream_id"]
        wait_ns = max(kernel["start_ns"] - previous_end.get(stream, kernel["start_ns"]), 0)
        previous_end[stream] = kernel["start_ns"] + kernel["dur_ns"]

        def shaped(value, quoted=False):
            if level0_na:
                return "N/A"
            return f'"{value}"' if quoted else value

        rows.append([
            data.device_id, MODEL_ID_INVALID, kernel["task_id"], stream, kernel["name"],
            "N/A" if level0_na else kernel["op_type"], "N/A" if level0_na else "dynamic",
            "N/A" if level0_na else kernel["task_type"],
            # CANN appends a TAB so spreadsheets keep the full timestamp; readers must strip it.
            ns_to_us_str(kernel["start_ns"]) + "\t", ns_to_us(kernel["dur_ns"]), ns_to_us(wait_ns),
            0 if level0_na else kernel["block_dim"], 0, "NO",
            shaped(kernel["input_shapes"], True), shaped(kernel["input_dtypes"]), shaped(kernel["input_formats"]),
            shaped(kernel["output_shapes"], True), shaped(kernel["output_dtypes"]),
            shaped(kernel["output_formats"]), "N/A",
        ] + _metric_values(kernel, data.config.aic_metrics))
    return rows


def write_csv(directory: str, name: str, headers: list, rows: list) -> str:
    """Like torch_npu's FileManager: an empty table produces no file at all."""
    if not rows:
        return ""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640), "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(headers)
        writer.writerows(rows)
    return path


def _op_statistic_rows(data: RunData) -> list:
    groups = {}
    for kernel in data.kernels:
        groups.setdefault((kernel["op_type"], kernel["task_type"]), []).append(kernel["dur_ns"] / 1000)
    total = sum(sum(times) for times in groups.values()) or 1.0
    rows = [[data.device_id, op_type, core, len(times), round(sum(times), 3), round(min(times), 3),
             round(sum(times) / len(times), 3), round(max(times), 3), round(100 * sum(times) / total, 3)]
            for (op_type, core), times in groups.items()]
    return sorted(rows, key=lambda row: -row[4])


def _api_statistic_rows(data: RunData) -> list:
    groups = {}
    for api in data.apis:
        groups.setdefault((api["level"], api["name"]), []).append((api["end_ns"] - api["start_ns"]) / 1000)
    rows = []
    for (level, name), times in groups.items():
        mean = sum(times) / len(times)
        variance = sum((t - mean) ** 2 for t in times) / len(times)
        rows.append(["host", level, name, round(sum(times), 3), len(times), round(mean, 3), round(min(times), 3),
                     round(max(times), 3), round(variance, 3)])
    return sorted(rows, key=lambda row: -row[3])


def _task_time_rows(data: RunData) -> list:
    kinds = {"AI_CORE": "KERNEL_AICORE", "AI_VECTOR_CORE": "KERNEL_AIVEC"}
    return [[data.device_id, kernel["name"], kinds.get(kernel["task_type"], "KERNEL_AICORE"), kernel["stream_id"],
             kernel["task_id"], ns_to_us(kernel["dur_ns"]), ns_to_us_str(kernel["start_ns"]),
             ns_to_us_str(kernel["start_ns"] + kernel["dur_ns"])]
            for kernel in sorted(data.kernels, key=lambda k: k["start_ns"])]


OP_STATISTIC_HEADERS = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)",
                        "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
API_STATISTIC_HEADERS = ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)",
                         "Variance"]
TASK_TIME_HEADERS = ["Device_id", "kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)",
                     "task_start(us)", "task_stop(us)"]


def export(data: RunData) -> dict:
    """Run the pretend msprof export; returns {summary kind: csv path} for the files it wrote."""
    cann_dir = data.cann_dir
    output_dir = os.path.join(cann_dir, OUTPUT_SUBDIR)
    shutil.rmtree(output_dir, ignore_errors=True)
    stamp = time.strftime("%Y%m%d%H%M%S")
    subdirs = ["host"] + ([f"device_{data.device_id}"] if data.device_id >= 0 else [])
    for sub in subdirs:
        for name in EXPORT_DIRS:
            os.makedirs(os.path.join(cann_dir, sub, name), exist_ok=True)
    for name in ("mindstudio_profiler_log", "analyze"):
        os.makedirs(os.path.join(cann_dir, name), exist_ok=True)
    with open(os.path.join(cann_dir, f"msprof_analysis_{stamp}.log"), "w", encoding="utf-8") as log:
        log.write(f"[INFO] fake msprof export of {len(data.kernels)} tasks\n")
    detailed = data.config.level in (C.LEVEL1, C.LEVEL2)
    tables = {
        "op_summary": (op_summary_headers(data.config.aic_metrics), op_summary_rows(data)),
        "task_time": (TASK_TIME_HEADERS, _task_time_rows(data)),
        "op_statistic": (OP_STATISTIC_HEADERS, _op_statistic_rows(data) if detailed else []),
        "api_statistic": (API_STATISTIC_HEADERS, _api_statistic_rows(data) if detailed else []),
    }
    written = {}
    for kind, (headers, rows) in tables.items():
        path = write_csv(output_dir, f"{kind}_{stamp}.csv", headers, rows)
        if path:
            written[kind] = path
    return written


def simplify(run_dir: str, cann_dir: str, simplify_flag) -> None:
    if not cann_dir:
        return
    doomed = EXPORT_DIRS if simplify_flag else ("sqlite",)
    subdirs = [os.path.join(cann_dir, "host")] + [
        os.path.join(cann_dir, name) for name in os.listdir(cann_dir) if name.startswith("device_")]
    for sub in subdirs:
        for name in doomed:
            shutil.rmtree(os.path.join(sub, name), ignore_errors=True)
    if simplify_flag:
        for name in ("analyze", "mindstudio_profiler_log", OUTPUT_SUBDIR):
            shutil.rmtree(os.path.join(cann_dir, name), ignore_errors=True)
        for name in os.listdir(cann_dir):
            if name.startswith("msprof_analysis_") and name.endswith(".log"):
                os.remove(os.path.join(cann_dir, name))
