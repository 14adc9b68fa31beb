"""What reading a big file found, remembered, so the second command and a re-run read nothing.

``check`` and ``summary`` read the same files: trace_view.json and kernel_details.csv are
97 % of a save path's bytes. The first command to read one stores what it found (the
``FileCheck``, and for kernel_details.csv the kernel totals too: one pass serves both
commands); the next command, or the same one run again, takes it from here.

An entry is one JSON file per input file, named by a hash of the input's real path, and holds
that path, its ``stamp`` (size, mtime, ctime, inode, device) and the readers' ``VERSION``;
any difference is a miss. Nothing is stored for a file changed less than ``RACY_SECONDS``
before it was read (as git does for its index): a file rewritten within the clock's tick
could keep its size and times, the ctime of any later write is past the stored one. Small
files are not worth an entry (reading the entry costs what checking them does).

Where: ``$MINDSPEED_PROF_CACHE`` (a folder; ``off`` turns the cache off), else
``$XDG_CACHE_HOME/mindspeed_prof/readers`` (``~/.cache/...``). ``--no-cache`` on ``check``
and ``summary`` reads every byte again. A folder that cannot be written means no cache, never
a different verdict.
"""

import hashlib
import json
import os
import time

CACHE_ENV = "MINDSPEED_PROF_CACHE"
OFF = ("off", "0", "no", "false", "none")
# Bump when a reader's result for the same bytes changes: older entries are then misses.
VERSION = 2  # 2: a trace scan says the steps whose time is unreadable (read/numbers.py)
MIN_BYTES = 1 << 20
RACY_SECONDS = 5.0
_disabled = False


def disable():
    """No cache for the rest of this process (``--no-cache``)."""
    global _disabled
    _disabled = True


def folder():
    """The cache folder, or None when the cache is off."""
    if _disabled:
        return None
    chosen = os.environ.get(CACHE_ENV, "").strip()
    if chosen.lower() in OFF and chosen:
        return None
    if chosen:
        return chosen
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mindspeed_prof", "readers")


def stamp(path):
    """What must not change for an entry to hold; None when the file cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def worth_caching(path):
    current = stamp(path)
    return current is not None and current[0] >= MIN_BYTES and folder() is not None


def _entry_path(path):
    real = os.path.realpath(path)
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()
    return real, os.path.join(folder(), digest[:2], digest[2:42] + ".json")


def _read_entry(path):
    if folder() is None:
        return None, None, None
    real, entry_path = _entry_path(path)
    try:
        with open(entry_path, encoding="utf-8") as handle:
            entry = json.load(handle)
    except (OSError, ValueError):
        return real, entry_path, None
    return real, entry_path, entry if isinstance(entry, dict) else None


def load(path, kind):
    """The result of ``kind`` stored for ``path`` as it is now, else None."""
    real, _, entry = _read_entry(path)
    if not entry or entry.get("version") != VERSION or entry.get("path") != real:
        return None
    if entry.get("stamp") != stamp(path):
        return None
    results = entry.get("results")
    return results.get(kind) if isinstance(results, dict) else None


def store(path, before, results):
    """Remember ``results`` ({kind: JSON-able}) for ``path``, read while its stamp was
    ``before``; nothing when the file changed meanwhile, or too recently to trust its times."""
    if before is None or before[0] < MIN_BYTES or folder() is None:
        return
    now = time.time_ns()
    if stamp(path) != before or min(now - before[1], now - before[2]) < RACY_SECONDS * 1e9:
        return
    real, entry_path, entry = _read_entry(path)
    kept = {}
    if entry and entry.get("version") == VERSION and entry.get("path") == real \
            and entry.get("stamp") == before and isinstance(entry.get("results"), dict):
        kept = entry["results"]
    kept.update(results)
    data = {"version": VERSION, "path": real, "stamp": before, "results": kept}
    tmp = f"{entry_path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(entry_path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(data, handle, separators=(",", ":"))
        os.replace(tmp, entry_path)  # whole or not at all: readers never see half an entry
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def remembered(path, kind, read, to_entry, from_entry, corrupt=None):
    """``read(path)``, or what an earlier read of this file as it is now found: ``to_entry``
    and ``from_entry`` turn the result into JSON and back (an entry of another shape is a miss),
    and a ``corrupt`` error (its message) is remembered and raised again, as the read would;
    without ``corrupt`` the result carries its own errors."""
    before = stamp(path) if worth_caching(path) else None
    if before is not None:
        hit = load(path, kind)
        if isinstance(hit, dict):
            if corrupt is not None and isinstance(hit.get("error"), str):
                raise corrupt(hit["error"])
            try:
                return from_entry(hit)
            except (KeyError, TypeError, ValueError):
                pass  # an entry of another shape: read the file
    try:
        result = read(path)
    except corrupt or () as exc:  # () catches nothing: errors inside the result
        store(path, before, {kind: {"error": str(exc)}})
        raise
    store(path, before, {kind: to_entry(result)})
    return result
