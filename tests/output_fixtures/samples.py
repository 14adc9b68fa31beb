"""Build profiler output trees from the real Ascend samples (tests/data/ascend_samples).

Everything is built in a test's tmp dir; the samples themselves are never modified. The
samples come from a 2-rank Megatron GPT-3 job on Ascend 910B (see SOURCES.md there).
"""

import csv
import gzip
import json
import os
import shutil

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(TESTS, "data", "ascend_samples")
MSINSIGHT = os.path.join(SAMPLES, "msinsight", "server", "src", "test")
TEST_DATA = os.path.join(MSINSIGHT, "test_data")
ADVISOR = os.path.join(SAMPLES, "msprof-analyze", "test", "ut", "advisor")
TIMELINE_GZ = os.path.join(ADVISOR, "timeline_advice", "trace_view.json.gz")
KERNELS_NOV_2023 = os.path.join(ADVISOR, "advisor_backend", "compute_advice", "kernel_details.csv")
KERNELS_JAN_2025 = os.path.join(ADVISOR, "compute_advice", "data", "kernel_details.csv")
OP_SUMMARY = os.path.join(TEST_DATA, "test_kernel_parse", "op_summary_1.csv")
HEATMAP_TRACE = os.path.join(TEST_DATA, "heatMap", "trace_view.json")
TINY_TRACE = os.path.join(MSINSIGHT, "fuzz", "test_data", "trace_view_tiny.json")
CLUSTER_STEP_TRACE = os.path.join(TEST_DATA, "cluster_analysis_output",
                                  "cluster_step_trace_time.csv")
MSPROF_DB = os.path.join(TEST_DATA, "full_db", "msprof_0.db")
ANALYSIS_DB = os.path.join(TEST_DATA, "multiDevice", "msprof_db", "ASCEND_PROFILER_OUTPUT",
                           "analysis.dat")
OUTPUT = "ASCEND_PROFILER_OUTPUT"
# A real torch_npu db export and a text export of the same job (level1, rank 0; two runs of it)
PYTORCH_SAMPLES = os.path.join(SAMPLES, "msinsight", "test", "data", "pytorch")
REAL_DB_CAPTURE = os.path.join(PYTORCH_SAMPLES, "db", "level1", "rank0_ascend_pt")
REAL_TEXT_CAPTURE = os.path.join(PYTORCH_SAMPLES, "text", "level1", "rank0_ascend_pt")


def sample_output(rank):
    """The sample ASCEND_PROFILER_OUTPUT of rank 0 or 1."""
    return os.path.join(TEST_DATA, f"test_rank_{rank}", OUTPUT)


def sample_info(rank):
    return os.path.join(TEST_DATA, f"test_rank_{rank}", f"profiler_info_{rank}.json")


def run_name(rank, timestamp="20230919172259000", pid=None):
    return f"rank{rank}_{pid or 1408366 + rank}_{timestamp}_ascend_pt"


def npu_capture(parent, rank=0, *, timestamp="20230919172259000", sample=None,
                trace=True, op_statistic=True, info="ranked", raw=False, parsed=True,
                info_changes=None):
    """A parsed ``*_ascend_pt`` folder as torch_npu leaves it, made from a real sample.

    ``sample``: which sample rank's files to copy (default: rank % 2). ``info``: "ranked"
    (profiler_info_{rank}.json), "unranked" (profiler_info.json, no rank_id) or None.
    ``info_changes``: dict merged into config.experimental_config / common_config.
    """
    sample = rank % 2 if sample is None else sample
    path = os.path.join(str(parent), run_name(rank, timestamp))
    os.makedirs(path)
    if info:
        with open(sample_info(sample)) as handle:
            data = json.load(handle)
        data["rank_id"] = rank
        for section, changes in (info_changes or {}).items():
            data["config"][section].update(changes)
        name = f"profiler_info_{rank}.json"
        if info == "unranked":
            data.pop("rank_id")
            name = "profiler_info.json"
        with open(os.path.join(path, name), "w") as handle:
            json.dump(data, handle, indent=4)
    if raw:
        os.makedirs(os.path.join(path, "FRAMEWORK"))
        with open(os.path.join(path, "FRAMEWORK", "torch.op_range"), "wb") as handle:
            handle.write(b"\x00raw")
        os.makedirs(os.path.join(path, "PROF_000001_20230919172259000_FKFLNPEPPRRCFCBA", "host"))
    if parsed:
        out = os.path.join(path, OUTPUT)
        shutil.copytree(sample_output(sample), out)
        if trace:
            with gzip.open(TIMELINE_GZ, "rb") as src, \
                    open(os.path.join(out, "trace_view.json"), "wb") as dst:
                shutil.copyfileobj(src, dst)
        if op_statistic:
            write_op_statistic(os.path.join(out, "kernel_details.csv"),
                               os.path.join(out, "op_statistic.csv"))
    return path


def grow_table(path, past_bytes):
    """Repeat the rows of the CSV table ``path`` until it is longer than ``past_bytes`` (the
    sample's one ragged row left out: repeated, it would make the table corrupt)."""
    with open(path, newline="") as handle:
        header, *rows = csv.reader(handle)
    rows = [row for row in rows if len(row) == len(header)]
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        while handle.tell() <= past_bytes:
            writer.writerows(rows)


def write_op_statistic(kernel_details, target, device_id=None):
    """op_statistic.csv as CANN writes it, aggregated from a kernel_details.csv.

    No real op_statistic.csv is public (shared/ascend_samples/SOURCES.md); the header is the
    documented CANN one, with Device_id only when ``device_id`` is given (newer CANN).
    """
    groups = {}
    with open(kernel_details, newline="") as handle:
        for row in csv.DictReader(handle):
            if None in row.values():
                continue  # a ragged row (rank 0's sample has one)
            key = (row["Type"], row["Accelerator Core"])
            groups.setdefault(key, []).append(float(row["Duration(us)"]))
    total = sum(sum(v) for v in groups.values())
    header = ["OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)",
              "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
    if device_id is not None:
        header.insert(0, "Device_id")
    with open(target, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for (op_type, core), values in sorted(groups.items(), key=lambda kv: -sum(kv[1])):
            row = [op_type, core, len(values), round(sum(values), 3), min(values),
                   round(sum(values) / len(values), 3), max(values),
                   round(100 * sum(values) / total, 3)]
            writer.writerow(([device_id] if device_id is not None else []) + row)


def db_capture(parent, rank=0, timestamp="20230919172259000"):
    """A db-export capture of torch_npu (level1, CPU + NPU), as the real one upstream: its
    profiler_info_0.json, analysis.db and ascend_pytorch_profiler_0.db (stored gzipped here),
    given ``rank``'s names (the tables inside still say rank 0)."""
    path = os.path.join(str(parent), run_name(rank, timestamp))
    out = os.path.join(path, OUTPUT)
    os.makedirs(out)
    with open(os.path.join(REAL_DB_CAPTURE, "profiler_info_0.json")) as handle:
        info = json.load(handle)
    info["rank_id"] = rank
    with open(os.path.join(path, f"profiler_info_{rank}.json"), "w") as handle:
        json.dump(info, handle, indent=4)
    with gzip.open(os.path.join(REAL_DB_CAPTURE, OUTPUT, "ascend_pytorch_profiler_0.db.gz"),
                   "rb") as src, \
            open(os.path.join(out, f"ascend_pytorch_profiler_{rank}.db"), "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copy(os.path.join(REAL_DB_CAPTURE, OUTPUT, "analysis.db"), out)
    open(os.path.join(out, "analyse.done"), "w").close()
    return path


def text_capture_of_the_db_job(parent):
    """The text export of the job db_capture's database comes from (another run of it):
    its profiler_info_0.json and tables, no trace_view.json (not kept here: 2.2 MB)."""
    path = os.path.join(str(parent), run_name(0, "20250109074804000"))
    shutil.copytree(REAL_TEXT_CAPTURE, path)
    return path


def two_ranks(parent):
    """A save path holding rank 0 and rank 1 of the sample job."""
    return [npu_capture(parent, 0), npu_capture(parent, 1)]


def write_manifest(parent, rank, **fields):
    """A profile_manifest_rank{R}.json in our schema (mindspeed_prof.recording.manifest)."""
    data = {
        "schema": 1, "tool": "mindspeed_prof", "tool_version": "test", "rank": rank,
        "world_size": 2, "local_rank": rank, "hostname": "test", "pid": 1,
        "selected_ranks": [0, 1], "backend": "npu",
        "config": {"profile_level": "level1", "profile_export_type": "text",
                   "profile_with_memory": True, "profile_record_shapes": True,
                   "profile_with_cpu": True},
        "windows": [], "parallel": None, "versions": {}, "status": "complete",
        "exit": None, "errors": [], "warnings": [], "files": [],
    }
    data.update(fields)
    path = os.path.join(str(parent), f"profile_manifest_rank{rank}.json")
    with open(path, "w") as handle:
        json.dump(data, handle, indent=2)
    return path


def write_run_manifest(parent, rank, run_id, started_ns, files, **fields):
    """One job's manifest for ``rank`` (the plain name when free, else the job's own, as
    mindspeed_prof.recording.manifest claims it), listing ``files`` (paths under ``parent``)."""
    import time

    parent = str(parent)
    name = f"profile_manifest_rank{rank}.json"
    if os.path.exists(os.path.join(parent, name)):
        name = f"profile_manifest_rank{rank}.{run_id}.json"
    data = {"schema": 1, "tool": "mindspeed_prof", "rank": rank, "world_size": 2,
            "hostname": "node", "pid": 100 + rank, "run_id": run_id, "selected_ranks": [rank],
            "backend": "torch", "config": {}, "windows": [], "status": "complete",
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started_ns / 1e9)),
            "started_ns": started_ns,
            "files": [os.path.relpath(str(f), parent) for f in files], **fields}
    with open(os.path.join(parent, name), "w") as handle:
        json.dump(data, handle, indent=2)
    return os.path.join(parent, name)
