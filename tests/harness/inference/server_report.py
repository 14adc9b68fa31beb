"""``{HARNESS_REPORT_DIR}/server_rank{R}.json``, written by each rank of a harness server: its
pid (so a test can stop rank 0 as Ctrl-C would), its main thread and the native id of the
thread that ran each request it served. Nothing is written without ``HARNESS_REPORT_DIR``."""

import json
import os
import threading


class ServerReport:
    """``{HARNESS_REPORT_DIR}/server_rank{R}.json``: pid, main thread and, per request this rank
    served, the native id of the thread that ran it (rewritten after every request)."""

    def __init__(self, rank):
        folder = os.environ.get("HARNESS_REPORT_DIR")
        self.path = os.path.join(folder, f"server_rank{rank}.json") if folder else None
        self.data = {"rank": rank, "pid": os.getpid(),
                     "main_thread": threading.main_thread().native_id, "request_threads": []}
        self.write()

    def write(self):
        if self.path is None:
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path + ".tmp", "w") as handle:
            json.dump(self.data, handle)
        os.replace(self.path + ".tmp", self.path)

    def spy_on(self, module):
        """Record the thread of every request ``module.run_mcore_engine`` serves."""
        serve = module.run_mcore_engine

        def run_mcore_engine_and_record(*args, **kwargs):
            self.data["request_threads"].append(threading.get_native_id())
            self.write()
            return serve(*args, **kwargs)

        module.run_mcore_engine = run_mcore_engine_and_record
