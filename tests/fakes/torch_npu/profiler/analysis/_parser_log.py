"""Per-run parser logs: <run>/logs/profiler_<YYYYmmddHHMMSS>_<pid>_<Parser>.log.

Written directly rather than through the logging module so that parsing never
attaches handlers to loggers the code under test may configure itself.
"""

import os
import sys
import time
import traceback

from torch_npu import _version
from .. import _constants as C


class ParserLog:
    def __init__(self, run_dir: str, parser_name: str) -> None:
        log_dir = os.path.join(run_dir, C.LOG_DIR)
        os.makedirs(log_dir, mode=0o750, exist_ok=True)
        stamp = time.strftime("%Y%m%d%H%M%S", time.localtime())
        self.path = os.path.join(log_dir, f"profiler_{stamp}_{os.getpid()}_{parser_name}.log")
        self.logger_name = f"AscendProfiler_{parser_name}"
        self.info("Profiler logger initialized at: %s", self.path)

    def _write(self, level: str, message: str, *args) -> None:
        now = time.time()
        stamp = time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime(now))
        if _version.PARSER_LOG_HAS_MILLISECONDS:
            stamp += f".{int(now * 1000) % 1000:03d}"
        line_no = sys._getframe(2).f_lineno
        text = message % args if args else message
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(f"[{stamp}] [{level}] [{self.logger_name}:{line_no}] {text}\n")

    def info(self, message: str, *args) -> None:
        self._write("INFO", message, *args)

    def error(self, message: str, *args, exc_info: bool = False) -> None:
        text = message % args if args else message
        if exc_info:
            text += "\n" + traceback.format_exc().rstrip()
        self._write("ERROR", text)
