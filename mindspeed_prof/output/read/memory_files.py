"""Where allocator snapshots lie under a save path (``memory_snapshot_rank{R}.pickle`` in each
window's folder, ``memory_oom_rank{R}[.n].pickle`` in the save path): found by name, walked as
``discover`` walks (never into a capture, at most ``MAX_DEPTH`` folders down)."""

import os
from dataclasses import dataclass
from typing import List, Optional, Tuple

from ...layout import ASCEND_PT_SUFFIX, MEMORY_FILE_RE, parse_window_dir
from .discover import MAX_DEPTH, SKIP_DIRS


@dataclass(frozen=True)
class SnapshotFile:
    path: str
    rel: str       # relative to the directory searched
    rank: int
    kind: str      # "snapshot" (a window's) or "oom"
    folder: str    # its folder, relative ("." for the save path itself)
    window: Optional[Tuple[int, int]] = None  # [start, end) of the window folder holding it

    @property
    def label(self) -> str:
        """How tables name it: its folder, and ``oom`` for an out-of-memory dump."""
        where = "." if self.folder == "." else self.folder
        return f"{where} (out of memory)" if self.kind == "oom" else where


def find_snapshots(root: str) -> List[SnapshotFile]:
    root = os.path.abspath(root)
    found = []
    for folder, dirs, files in os.walk(root):
        depth = 0 if folder == root else os.path.relpath(folder, root).count(os.sep) + 1
        dirs[:] = sorted(d for d in dirs if not d.endswith(ASCEND_PT_SUFFIX)
                         and not d.startswith(".") and d not in SKIP_DIRS and depth < MAX_DEPTH)
        for name in sorted(files):
            match = MEMORY_FILE_RE.match(name)
            if match is None:
                continue
            rel_folder = os.path.relpath(folder, root)
            window = None
            for part in reversed(rel_folder.split(os.sep)):
                parsed = parse_window_dir(part)
                if parsed is not None:
                    window = (parsed[1], parsed[2])
                    break
            found.append(SnapshotFile(path=os.path.join(folder, name),
                                      rel=os.path.relpath(os.path.join(folder, name), root),
                                      rank=int(match.group(2)), kind=match.group(1),
                                      folder=rel_folder, window=window))
    return sorted(found, key=lambda f: (f.rank, f.kind != "snapshot", f.rel))
