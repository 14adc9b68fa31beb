"""The RL role layout (DESIGN §6): which folders are a role's (or a role stage's) save path.

    {save_path}/
      {role}/                      a complete save path: manifests (with "role"), step_{g}-{g}/
      {role}/{stage}/              one per selected stage (manifests with "role" and "stage")

A folder is a role's when its manifests carry a ``role``; training and inference manifests
carry none, so their layout has no role folder.
"""

import os
from dataclasses import dataclass
from typing import List, Optional

from .discover import discover

WHOLE_STEP = "step"  # how a role's whole-step sessions are named beside its stages


@dataclass(frozen=True)
class RoleRoot:
    """A folder that is one role's (or one role stage's) save path."""

    role: str
    stage: Optional[str]
    path: str
    rel: str

    @property
    def part(self):
        return self.stage or WHOLE_STEP


def role_roots(path: str) -> List[RoleRoot]:
    """The role folders under ``path`` (``path`` itself when it is one); [] for training or
    inference output, whose manifests carry no role."""
    if not os.path.isdir(path):
        return []
    found = discover(path)
    roots: dict = {}
    for entry in found.manifests:
        role = entry.data.get("role") if isinstance(entry.data, dict) else None
        if not isinstance(role, str) or not role:
            continue
        folder = os.path.dirname(entry.path)
        stage = entry.data.get("stage")
        roots.setdefault(folder, RoleRoot(role, stage if isinstance(stage, str) else None, folder,
                                          os.path.relpath(folder, found.root)))
    return sorted(roots.values(), key=lambda r: (r.role, r.stage or "", r.rel))
