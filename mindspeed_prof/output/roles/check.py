"""``check``'s verdict per (role, rank) of the RL role layout (``read/roles.py``).

Every folder holding a role's manifests is checked as the save path it is (``check_directory``);
a (role, rank) gets the worst verdict of its folders, and each role expects the ranks its own
manifests selected.
"""

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..read.discover import discover
from ..read.roles import RoleRoot
from ..check.directory import check_directory
from ..check.report import VALID, Report, worst


@dataclass
class RoleRank:
    role: str
    rank: int
    verdict: str = VALID
    parts: Dict[str, str] = field(default_factory=dict)  # stage (or "step") -> verdict
    problems: List[str] = field(default_factory=list)

    def as_dict(self):
        return {"role": self.role, "rank": self.rank, "verdict": self.verdict,
                "parts": self.parts, "problems": self.problems}


@dataclass
class RoleCheck:
    directory: str
    expected: Dict[str, List[int]] = field(default_factory=dict)  # role -> ranks
    ranks: List[RoleRank] = field(default_factory=list)
    reports: List[tuple] = field(default_factory=list)  # (RoleRoot, Report)
    warnings: List[str] = field(default_factory=list)

    @property
    def ok(self):
        return bool(self.ranks) and all(r.verdict == VALID for r in self.ranks)

    @property
    def exit_code(self):
        return 0 if self.ok else 1

    def verdict(self, role, rank):
        return next((r.verdict for r in self.ranks if (r.role, r.rank) == (role, rank)), None)

    def as_dict(self):
        return {"directory": self.directory, "layout": "roles", "ok": self.ok,
                "exit_code": self.exit_code, "expected_ranks": self.expected,
                "ranks": [r.as_dict() for r in self.ranks], "warnings": self.warnings,
                "folders": [{"role": root.role, "stage": root.stage, "path": root.rel,
                             **report.as_dict()} for root, report in self.reports]}


def check_roles(path: str, roots: List[RoleRoot],
                expected_ranks: Optional[List[int]] = None, run: Optional[str] = None) -> RoleCheck:
    """Check each role folder; ``expected_ranks`` (``--ranks``) and ``run`` (``--run``) apply to
    every role."""
    result = RoleCheck(directory=os.path.abspath(path))
    by_key: dict = {}
    for root in roots:
        report: Report = check_directory(root.path, expected_ranks, run=run)
        result.reports.append((root, report))
        expected = result.expected.setdefault(root.role, [])
        expected[:] = sorted(set(expected) | set(report.expected_ranks))
        for warning in report.warnings:
            result.warnings.append(f"{root.rel}: {warning}")
        for rank_report in report.ranks:
            key = (root.role, rank_report.rank)
            entry = by_key.setdefault(key, RoleRank(root.role, rank_report.rank))
            entry.verdict = worst(entry.verdict, rank_report.verdict)
            entry.parts[root.part] = worst(entry.parts.get(root.part), rank_report.verdict)
            entry.problems.extend(f"{root.rel}: {p}" for p in rank_report.problems)
            entry.problems.extend(f"{root.rel}: {p}" for run in rank_report.runs
                                  for p in run.problems)
        for capture in report.unranked:
            result.warnings.append(f"{root.rel}: {capture.path}: rank unknown "
                                   f"({capture.verdict})")
    result.ranks = [by_key[key] for key in sorted(by_key)]
    _stray_captures(path, roots, result)
    return result


def _stray_captures(path, roots, result):
    """Captures outside every role folder: written by something that is no role (a controller)."""
    inside = [root.path + os.sep for root in roots]
    for run in discover(path).runs:
        if not any(run.path.startswith(prefix) for prefix in inside):
            result.warnings.append(f"{run.rel} lies outside every role folder: not checked "
                                   f"(RL output goes to {{save}}/{{role}}/)")
