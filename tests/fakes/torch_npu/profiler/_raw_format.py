"""Layout and encoding of the raw (unparsed) data inside a run directory.

The real native layer writes binary TLV records; the fake writes gzip-compressed
JSON behind a magic prefix. Only this module knows the encoding, so capture (which
writes) and the offline parser (which reads, maybe in another process) agree.
"""

import gzip
import json
import os
import re

from . import _constants as C

MAGIC = b"FAKENPU\x01"
FILE_MODE = 0o640

# FRAMEWORK/ files, named like the real ones
OP_RANGE = "torch.op_range"
OP_MARK = "torch.op_mark"
MEMORY_USAGE = "torch.memory_usage"
PYTHON_TRACER_FUNC = "torch.python_tracer_func"
PYTHON_TRACER_HASH = "torch.python_tracer_hash"

CANN_DIR_PATTERN = re.compile(r"^PROF_\d+_\d+_[0-9a-zA-Z]+")
DEVICE_DIR_PATTERN = re.compile(r"^device_(\d+)$")
DEVICE_TASKS = "task_track.{device}.slice_0"
HOST_APIS = "api_event.slice_0"
HOST_MSTX = "msproftx.slice_0"  # host mstx marks and ranges (CANN's msproftx data)


def write_blob(path: str, payload) -> None:
    data = MAGIC + gzip.compress(json.dumps(payload, separators=(",", ":")).encode("utf-8"))
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE), "wb") as handle:
        handle.write(data)


def read_blob(path: str):
    with open(path, "rb") as handle:
        data = handle.read()
    if not data.startswith(MAGIC):
        raise ValueError(f"{path} is not raw data written by the fake torch_npu.")
    return json.loads(gzip.decompress(data[len(MAGIC):]).decode("utf-8"))


def write_json(path: str, payload, indent=None) -> None:
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE), "w", encoding="utf-8") as handle:
        json.dump(payload, handle, indent=indent)


def framework_dir(run_dir: str) -> str:
    return os.path.join(run_dir, C.FRAMEWORK_DIR)


def find_cann_dir(run_dir: str) -> str:
    for name in sorted(os.listdir(run_dir)):
        path = os.path.join(run_dir, name)
        if os.path.isdir(path) and CANN_DIR_PATTERN.match(name):
            return path
    return ""


def find_device_dirs(cann_dir: str) -> list:
    if not cann_dir:
        return []
    found = []
    for name in sorted(os.listdir(cann_dir)):
        match = DEVICE_DIR_PATTERN.match(name)
        if match and os.path.isdir(os.path.join(cann_dir, name)):
            found.append((int(match.group(1)), os.path.join(cann_dir, name)))
    return found


def host_dir(cann_dir: str) -> str:
    path = os.path.join(cann_dir, "host") if cann_dir else ""
    return path if path and os.path.isdir(path) else ""


def is_run_dir(path: str) -> bool:
    return os.path.isdir(framework_dir(path)) or bool(find_cann_dir(path))


def find_info_file(run_dir: str) -> str:
    for name in sorted(os.listdir(run_dir)):
        if name == "profiler_info.json" or re.match(r"^profiler_info_\d+\.json", name):
            return os.path.join(run_dir, name)
    return ""
