"""Error lines from torch_npu's per-run parser logs (``{run}/logs/*.log``).

torch_npu writes ``analyse.done`` even when a sub-parser failed (the exception is only logged),
so these lines are often the only trace of why a file is missing.
"""

import os
import re

ERROR_RE = re.compile(rb"\[ERROR\]|\bERROR\b")
# Rotated logs reach 10 MB each; reading more than this of one would only repeat itself.
MAX_LOG_BYTES = 64 << 20
MAX_LINE_CHARS = 400


def log_files(run_dir):
    logs = os.path.join(run_dir, "logs")
    try:
        names = sorted(os.listdir(logs))
    except OSError:
        return []
    return [os.path.join(logs, n) for n in names
            if ".log" in n and os.path.isfile(os.path.join(logs, n))]


def error_lines(run_dir, limit=20):
    """(first ``limit`` error lines as ``"logs/<file>:<line>: <text>"``, how many there were)."""
    found, total = [], 0
    for path in log_files(run_dir):
        name = os.path.relpath(path, run_dir)
        try:
            with open(path, "rb") as handle:
                read = 0
                for number, raw in enumerate(handle, 1):
                    read += len(raw)
                    if read > MAX_LOG_BYTES:
                        break
                    if ERROR_RE.search(raw):
                        total += 1
                        if len(found) < limit:
                            text = raw.decode("utf-8", "replace").strip()[:MAX_LINE_CHARS]
                            found.append(f"{name}:{number}: {text}")
        except OSError as exc:
            found.append(f"{name}: unreadable ({exc.strerror or exc})")
            total += 1
    return found, total
