"""Path validation and the process-wide run-directory creator (ProfPathCreator).

The singleton is the reason "the last tensorboard_trace_handler() built wins": every
profiler in the process asks it for the next run directory.
"""

import os
import re
import shutil
import socket
import threading
from datetime import datetime, timezone

from torch_npu import _version
from . import _constants as C
from ._console import ErrCode, print_warn_msg, prof_error, pta_error

MAX_PATH_LENGTH = 4096
MAX_FILE_NAME_LENGTH = 255
_ALLOWED_PATH = re.compile(r"(\.|/|_|-|\s|[~0-9a-zA-Z]|[\u4e00-\u9fa5])+")
DIR_MODE = 0o750


def realpath(path: str) -> str:
    if not path:
        raise RuntimeError("Input path is empty, please check. ErrorType: resource unavailable")
    path = os.path.expanduser(path)
    if os.path.islink(path):
        raise RuntimeError(f"Invalid input path is a soft chain: {path}" + prof_error(ErrCode.UNAVAIL))
    return os.path.realpath(path)


def check_input_path(path: str) -> None:
    if len(path) > MAX_PATH_LENGTH:
        raise RuntimeError("Length of input path exceeds the limit." + pta_error(ErrCode.PARAM))
    if os.path.islink(path):
        raise RuntimeError(f"Invalid input path is a soft chain: {path}" + pta_error(ErrCode.UNAVAIL))
    if not _ALLOWED_PATH.fullmatch(path):
        raise RuntimeError(f"Invalid input path: {path}" + pta_error(ErrCode.PARAM))
    if any(len(part) > MAX_FILE_NAME_LENGTH for part in path.split("/")):
        raise RuntimeError("Length of input path exceeds the limit." + pta_error(ErrCode.PARAM))


def check_input_directory_path(path: str) -> None:
    check_input_path(path)
    if os.path.isfile(path):
        # The real message forgets its f-prefix; keep the literal braces.
        raise RuntimeError("Invalid input path is a file path: {path}" + pta_error(ErrCode.PARAM))


def check_directory_writeable(path: str) -> None:
    if not os.path.exists(path):
        raise RuntimeError(f"The path does not exist: {path}" + pta_error(ErrCode.NOT_FOUND))
    if os.path.islink(path):
        raise RuntimeError(f"Invalid path is a soft chain: {path}" + pta_error(ErrCode.UNAVAIL))
    if not os.access(path, os.W_OK):
        raise RuntimeError(f"The path permission check failed: {path}" + pta_error(ErrCode.PERMISSION))


def make_dir(path: str) -> None:
    os.makedirs(path, mode=DIR_MODE, exist_ok=True)


def run_dir_timestamp() -> str:
    if _version.RUN_DIR_TIME_IS_UTC:
        now = datetime.now(tz=timezone.utc)
    else:
        now = datetime.now(tz=timezone.utc).astimezone()
    return now.strftime("%Y%m%d%H%M%S%f")[:-3]


class ProfPathCreator:
    """Process-wide singleton: ProfPathCreator() always returns the same object."""

    _instance = None
    _lock = threading.Lock()

    def __new__(cls):
        with cls._lock:
            if cls._instance is None:
                instance = super().__new__(cls)
                instance._reset()
                cls._instance = instance
        return cls._instance

    def _reset(self) -> None:
        self._prof_path = None
        self._worker_name = None
        self._dir_path = None
        self._export_only_mode = False
        self.is_prof_inited = False

    def init(self, worker_name: str = None, dir_name: str = None, export_only_mode: bool = False) -> None:
        # Same order as the wheel: a bad dir_name raises after worker_name was already taken.
        self._export_only_mode = export_only_mode
        valid_name = isinstance(worker_name, str) and worker_name and len(worker_name) < C.MAX_WORKER_NAME_LENGTH
        if valid_name or worker_name is None:
            self._worker_name = worker_name
        else:
            print_warn_msg("Invalid parameter worker_name, reset it to default.")
            self._worker_name = None
        if dir_name and isinstance(dir_name, str):
            dir_path = realpath(dir_name)
            check_input_directory_path(dir_path)
            self._dir_path = dir_path
        elif dir_name is None:
            self._dir_path = None
        else:
            print_warn_msg("Invalid parameter dir_name, reset it to default.")
            self._dir_path = None

    def _parent_dir(self) -> str:
        if self._dir_path:
            return self._dir_path
        work_path = os.getenv(C.ASCEND_WORK_PATH_ENV)
        self._export_only_mode = self._export_only_mode and work_path is None
        if work_path:
            return os.path.join(os.path.abspath(work_path), C.PROFILING_WORK_DIR)
        if self._export_only_mode:
            return os.path.join(os.getcwd(), C.EXPORT_ONLY_DIR)
        return os.getcwd()

    def create_prof_dir(self) -> None:
        parent = self._parent_dir()
        if os.path.exists(parent):
            check_directory_writeable(parent)
        worker = f"{self._worker_name or socket.gethostname()}_{os.getpid()}"
        self._prof_path = os.path.join(parent, f"{worker}_{run_dir_timestamp()}_{C.RUN_DIR_SUFFIX}")
        check_input_directory_path(self._prof_path)
        make_dir(self._prof_path)
        check_directory_writeable(self._prof_path)
        self.is_prof_inited = True

    def get_prof_dir(self) -> str:
        return self._prof_path

    def delete_export_only_prof(self) -> None:
        if self._export_only_mode:
            self.delete_prof_dir()

    def delete_prof_dir(self) -> None:
        try:
            shutil.rmtree(self._prof_path)
        except Exception:
            print_warn_msg("Remove temporary profiling data saving path failed.")
