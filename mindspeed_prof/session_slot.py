"""One *running* profiler session per process (DESIGN §6).

torch's and torch_npu's profilers cannot nest: a second session started beside a running one
fails or corrupts both. Several recorders may live in one process (colocated RL roles, a
server's requests), so the rule is kept here, process-wide, and each recorder claims the slot
for the length of a session.
"""

import threading
from typing import Optional


class SessionSlot:
    def __init__(self) -> None:
        self._holder = None
        self._lock = threading.Lock()

    def claim(self, owner) -> Optional[object]:
        """Take the slot for ``owner``: None when it now holds it, else the owner that does.
        A closed holder gives the slot up."""
        with self._lock:
            holder = self._holder
            if holder is None or holder is owner or holder.closed:
                self._holder = owner
                return None
            return holder

    def release(self, owner) -> None:
        with self._lock:
            if self._holder is owner:
                self._holder = None


PROCESS = SessionSlot()
