"""Device-side CSVs: kernel_details, step_trace_time, and the CANN summaries copied verbatim."""

import csv
import os
import shutil

from torch_npu import _version
from .. import _constants as C
from ._cann_export import block_columns, write_csv
from ._run_data import RunData, us_str_to_ns
from ._timeline import step_breakdown

KERNEL_DETAILS = "kernel_details.csv"
STEP_TRACE_TIME = "step_trace_time.csv"
STEP_TRACE_HEADERS = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
                      "Communication", "Free", "Stage", "Bubble",
                      "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
_SHAPE_HEADERS = ["Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
                  "Output Formats"]
_RENAMES = {"Op Name": "Name", "OP Type": "Type", "Task Type": "Accelerator Core",
            "Task Start Time(us)": "Start Time(us)", "Task Duration(us)": "Duration(us)",
            "Task Wait Time(us)": "Wait Time(us)"}


def _show_headers() -> list:
    return ["Device_id", "Op Name", "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)",
            "Task Wait Time(us)", block_columns()[0]]


def _all_headers_wanted(data: RunData) -> bool:
    if _version.KERNEL_FULL_HEADERS_BY_LEVEL:
        return data.config.level != C.LEVEL0
    return data.config.aic_metrics != C.AIC_NONE


def write_kernel_details(data: RunData, op_summary_path: str, output_dir: str) -> None:
    if not op_summary_path:
        return
    with open(op_summary_path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        source_headers, records = list(reader.fieldnames or []), list(reader)
    if _all_headers_wanted(data):
        picked = source_headers
    else:
        picked = _show_headers()
        if _version.KERNEL_LEVEL0_SHAPE_COLUMNS:
            picked += [name for name in _SHAPE_HEADERS if name in source_headers]
    headers = [_RENAMES.get(name, name) for name in picked]
    rows = [[record.get(name, "") for name in picked] for record in records]
    if data.steps:
        headers = ["Step Id"] + headers
        rows = [[data.step_of(us_str_to_ns(record["Task Start Time(us)"]))] + row
                for record, row in zip(records, rows)]
    write_csv(output_dir, KERNEL_DETAILS, headers, rows)


def write_step_trace_time(data: RunData, output_dir: str) -> None:
    if not data.kernels:
        return
    windows = [(step_id, start, end) for step_id, start, end in data.steps] or [("", None, None)]
    rows = []
    for step_id, start, end in windows:
        inside = [k for k in data.kernels if start is None or start <= k["start_ns"] <= end]
        if not inside:
            continue
        figures = step_breakdown(inside, start)
        rows.append([data.device_id, step_id, figures["computing"], 0.0, 0.0, 0.0, figures["free"],
                     figures["stage"], 0.0, 0.0, figures["preparing"]])
    write_csv(output_dir, STEP_TRACE_TIME, STEP_TRACE_HEADERS, rows)


def copy_cann_summaries(data: RunData, exported: dict, output_dir: str) -> None:
    """op_statistic/api_statistic (Level1/2) and task_time (>=2.11) pass through unchanged."""
    wanted = ["op_statistic", "api_statistic"] if data.config.level in (C.LEVEL1, C.LEVEL2) else []
    if _version.WRITES_TASK_TIME and data.config.level != C.LEVEL_NONE:
        wanted.append("task_time")
    for kind in wanted:
        if kind in exported:
            os.makedirs(output_dir, exist_ok=True)
            shutil.copyfile(exported[kind], os.path.join(output_dir, f"{kind}.csv"))
