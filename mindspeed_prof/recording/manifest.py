"""``profile_manifest_rank{R}.json``: what one rank was asked to do, what it did, what went wrong.

Written when the rank arms (status ``armed``), rewritten at every state change, and always
atomically (temp file + rename) so a crash never leaves half a manifest. ``mindspeed-prof check``
reads it to know which ranks and iterations to expect.

Two jobs may write into one save path (the default ``./profile_dir`` makes it common): a manifest
another process wrote is never replaced. This run's then takes the name
``profile_manifest_rank{R}.{run_id}.json``, and ``check``/``summary`` judge each rank by its newest
manifest and name the runs they left out.

The fields, their types and meaning are ``mindspeed_prof/manifest_schema.py``'s (the readers judge a
manifest against the same table).
"""

import json
import os
import re
import socket
import time
from typing import Any, Dict, Iterable, List, Optional

from .. import log, manifest_schema
from ..config.budget import used_bytes
from ..errors import ConfigError
from ..layout import manifest_path
from .sections import SignalSafeLock, writing
from .manifest_entries import PlannedWindow, WindowEntry, overall_status
from .run_id import job_run
from ..version import __version__

SCHEMA = manifest_schema.VERSION
STATUSES = manifest_schema.STATUSES


# Manifests an open recorder of this process writes: a second recorder for the same rank and
# save path (a role's profiler created twice) would rewrite the first one's and orphan its trace.
_LIVE: set = set()
_LIVE_LOCK = SignalSafeLock()


def claim_for_recorder(path: str) -> None:
    """An open recorder is about to write ``path``: ConfigError while another one does."""
    key = os.path.abspath(path)
    with _LIVE_LOCK:
        if key in _LIVE:
            raise ConfigError(f"{path} is already written by another open profiler of this "
                              f"process (a role_profiler or driver created twice for the same "
                              f"role and rank): reuse the first one, or close it before creating "
                              f"another.")
        _LIVE.add(key)


def release_for_recorder(path: str) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(os.path.abspath(path))


def _claim(path, hostname, pid, run_id):
    """``path``, unless another process's manifest is there (or this process's with windows):
    then a name of this run's own."""
    base, ext = os.path.splitext(path)
    tag = re.sub(r"[^A-Za-z0-9_-]+", "-", run_id)[:24].strip("-") or "run"
    for candidate in [path] + [f"{base}.{tag}{f'-{n}' if n else ''}{ext}" for n in range(100)]:
        try:
            os.close(os.open(candidate, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return candidate  # claimed: a job starting at the same moment takes another name
        except FileExistsError:
            try:
                with open(candidate) as handle:
                    data = json.load(handle)
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and data.get("hostname") == hostname \
                    and data.get("pid") == pid and not data.get("windows"):
                return candidate  # this process's own, nothing recorded (a retried start)
        except OSError:
            return path  # no save path yet, or unwritable: the first save reports it
    return path


class Manifest:
    def __init__(self, path, *, rank, world_size, local_rank=None, backend, config,
                 selected_ranks=None, parallel=None, versions=None):
        hostname, pid, (run_id, run_id_source) = socket.gethostname(), os.getpid(), job_run()
        self.path = _claim(path, hostname, pid, run_id)
        # The export thread and the training thread both save; a signal's flush saves too, so
        # on the main thread a save is a section our handlers wait for the end of.
        self._lock = SignalSafeLock()
        self._write_failed = False
        self.data = {
            "schema": SCHEMA,
            "tool": "mindspeed_prof",
            "tool_version": __version__,
            "rank": rank,
            "world_size": world_size,
            "local_rank": local_rank,
            "hostname": hostname,
            "pid": pid,
            "run_id": run_id,
            "run_id_source": run_id_source,  # the readers go by it, never by run_id's spelling
            "selected_ranks": selected_ranks,
            "backend": backend,
            "config": config.as_dict(),
            "windows": [],
            "parallel": parallel,
            "versions": versions or {},
            "status": "armed",
            "exit": None,
            "errors": [],
            "warnings": [],
            "files": [],
            "started_at": _now(),
            "started_ns": time.time_ns(),  # orders two runs that started in the same second
            "updated_at": _now(),
        }

    @property
    def status(self):
        return self.data["status"]

    def set_status(self, status):
        self.data["status"] = status
        self.save()

    def describe_run(self, *, unit: str, role: Optional[str], first: Optional[int],
                     last: Optional[int], stage: Optional[str] = None) -> None:
        """What the windows count and which part of the work wrote them."""
        data = self.data
        data["unit"], data["role"] = unit, role
        if stage is not None:
            data["stage"] = stage
        # Kept under the training names: check and older readers know them.
        data["first_iteration"], data["train_iters"] = first, last
        self.save()

    def add_window(self, start: int, end: Optional[int], directory: str = ".") -> WindowEntry:
        window: Dict[str, Any] = {"start": start, "end": end, "dir": directory, "status": "running",
                  "iterations_recorded": [], "files": []}
        self.data["windows"].append(window)
        self.save()
        return WindowEntry(window)

    def add_planned(self, start: int, end: Optional[int]) -> PlannedWindow:
        planned: Dict[str, Any] = {"start": start, "end": end, "status": "running", "recorded": [],
                   "skipped": [], "refused": []}
        self.data.setdefault("planned", []).append(planned)
        self.save()
        return PlannedWindow(planned)

    def fail_window(self, window: WindowEntry) -> None:
        """The window's profiler could not even be built: the window failed, not running."""
        if window.status == "running":
            window.mark_failed()
            self.set_status(overall_status(self.data["windows"]))

    def set_served(self, served: int) -> None:
        self.data["requests_served"] = served

    def set_units_run(self, ran: int, last: Optional[int]) -> None:
        """The dynamic engine: how many engine steps this process ran, and the last one's
        number (numbers may jump: an engine reset starts them again)."""
        self.data["units_run"], self.data["last_unit"] = ran, last

    def set_window_cut(self, start: int, end: Optional[int], last_served: int) -> None:
        """Inference: the window of requests the server stopped inside (kept for readers of
        manifests before ``planned``)."""
        self.data["window_cut"] = {"start": start, "end": end, "last_served": last_served}

    def set_captures(self, captures: Dict[str, Any]) -> None:
        """The capture rules, the captures the job took and the anomalies it did not capture."""
        self.data["captures"] = captures

    def mark_nothing_profiled(self) -> None:
        self.data["status"] = "incomplete"

    def set_exit(self, reason: str, detail: Optional[str], events: Optional[dict] = None) -> None:
        self.data["exit"] = {"reason": reason, "detail": detail}
        if events:
            self.data["exit_events"] = events

    def record(self, kind, phase, message):
        """Append an error or warning; saved at once so a later crash cannot lose it."""
        entries = self.data["errors" if kind == "error" else "warnings"]
        entry = {"time": _now(), "phase": phase, "message": str(message)}
        if entry["message"] not in (e["message"] for e in entries):
            entries.append(entry)
            self.save()

    def add_oom(self, entry: Dict[str, Any], message: str) -> None:
        """The allocator ran out of memory; ``entry["snapshot"]`` is the snapshot written then."""
        oom = dict(entry, snapshot=os.path.relpath(entry["snapshot"], os.path.dirname(self.path)))
        self.data.setdefault("memory_oom", []).append(oom)
        self.add_files([entry["snapshot"]], save=False)
        self.record("error", "memory", message)
        self.save()  # record() saves only a message it has not seen

    def add_files(self, paths, window=None, save=True):
        base = os.path.dirname(self.path)
        for path in paths:
            rel = os.path.relpath(path, base)
            if rel not in self.data["files"]:
                self.data["files"].append(rel)
            if window is not None and rel not in window["files"]:
                window["files"].append(rel)
        if save:
            self.save()

    def window_saved(self, window: WindowEntry, outputs: Iterable[str], status: str) -> List[str]:
        """A window's files reached disk (or some did): list the new ones, set the window's and
        the rank's status, save once. Returns the new paths. ``cut``: every file is there, for
        the units the window kept."""
        base = os.path.dirname(self.path)
        entry = window.data
        new = [p for p in outputs if os.path.relpath(p, base) not in entry["files"]]
        self.add_files(new, entry, save=False)
        entry["status"] = "cut" if status == "complete" and window.is_cut else status
        self.set_status(overall_status(self.data["windows"], self.data.get("planned", ())))
        return new

    def used_bytes(self):
        """Bytes under the files this rank's windows wrote (what ``--profile-max-gb`` counts)."""
        base = os.path.dirname(self.path)
        return used_bytes([os.path.join(base, f) for f in self.data["files"]])

    def save(self, final: bool = False):
        """Write the manifest atomically. ``final`` (the recorder's close): when that fails (a
        full disk: no block for the temporary file), how the run ended is written over the
        manifest's own blocks instead (``_write_in_place``): the one write left that needs no
        new space."""
        with self._lock:
            written = self._write()
            if not written and final:
                written = self._write_in_place()
            return written

    def _write(self):
        self.data["updated_at"] = _now()
        tmp = f"{self.path}.tmp.{os.getpid()}"
        try:
            with writing(self.path), open(tmp, "w") as handle:
                json.dump(self.data, handle, indent=2, default=str)
            os.replace(tmp, self.path)
        except BaseException as exc:
            try:
                os.unlink(tmp)  # never a half-written temporary file beside the manifest
            except OSError:
                pass
            if not isinstance(exc, OSError):
                raise  # a host's own signal handler raising here, say
            # The manifest reports on the profile; failing to write it (disk full, save path
            # gone) must not become the training's failure, but it must not go unsaid either.
            if not self._write_failed:
                self._write_failed = True
                log.error(f"cannot write {self.path} ({exc.strerror or exc}): this rank's manifest "
                          f"is out of date; free space on --profile-save-path",
                          rank=self.data.get("rank"))
            return False
        self._write_failed = False
        return True


    def _write_in_place(self) -> bool:
        """Compact JSON over the old manifest's bytes, padded with spaces to its length (JSON
        allows them), so the file needs no new block; what does not fit (the longest lists)
        is left out, never how the run ended. Not atomic: only the last write does this."""
        try:
            size = os.path.getsize(self.path)
        except OSError:
            return False
        for data in (self.data, _essentials(self.data)):
            raw = json.dumps(data, separators=(",", ":"), default=str).encode()
            if len(raw) > size:
                continue
            try:
                with writing(self.path), open(self.path, "r+b") as handle:
                    handle.write(raw + b" " * (size - len(raw)))
            except OSError:
                return False
            left_out = "" if data is self.data else ", without its versions, file list and " \
                "per-unit notes, with its last error and warning only"
            log.warning(f"{self.path}: written over its old bytes, compact{left_out} (no room "
                        f"for a temporary file: the disk is full)", rank=self.data.get("rank"))
            self._write_failed = False
            return True
        return False


def _essentials(data: Dict[str, Any]) -> Dict[str, Any]:
    """The manifest without what can be long: what ``check`` needs to judge the rank (the
    status, the windows, how the run ended), with the errors and warnings cut to the last."""
    small = {key: value for key, value in data.items() if key not in ("versions", "files")}
    for key in ("errors", "warnings"):
        small[key] = list(data.get(key, ()))[-1:]
    small["windows"] = [{k: v for k, v in w.items() if k != "units"}
                        for w in data.get("windows", ())]
    return small


def read_manifest(path):
    """The manifest as a dict, or raises ValueError with the reason (for ``check``)."""
    with open(path) as handle:
        data = json.load(handle)
    if not isinstance(data, dict) or data.get("tool") != "mindspeed_prof":
        raise ValueError(f"{path} is not a mindspeed_prof manifest")
    return data


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())


def open_manifest(plan, backend: Optional[str], *, local_rank: Optional[int],
                  parallel: Optional[dict], first: Optional[int] = None,
                  last: Optional[int] = None) -> Manifest:
    """The manifest of a recorder with this plan, claimed for it (ConfigError while another
    open recorder of this process writes the same one) and written as armed."""
    from ..backends.memory import OOM
    from .environment import versions

    path = manifest_path(plan.save_path, plan.rank)
    claim_for_recorder(path)
    manifest = Manifest(path, rank=plan.rank, world_size=plan.world_size,
                        local_rank=local_rank, backend=backend, config=plan.config,
                        selected_ranks=list(plan.selected_ranks), parallel=parallel,
                        versions=versions())
    manifest.describe_run(unit=plan.unit.name, role=plan.role, first=first, last=last)
    OOM.tell(manifest)  # --profile-memory-oom: an out-of-memory is recorded in it too
    return manifest
