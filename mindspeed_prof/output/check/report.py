"""What ``check`` found: a verdict per capture, per rank, and the exit code they make.

Verdicts, from best to worst (a rank gets the worst of its captures):

    valid         every file its settings promise is there and readable
    cut           the run ended inside the window (a signal, an exception, sys.exit, a loop
                  that stopped early): the files are good for the iterations it kept, and the
                  trace's steps match them, but the window is not the one asked for
    incomplete    a promised file (or column, or profiled step) is missing, or the rank is
                  known only from its allocator snapshot (nothing says what it recorded)
    unparsed      raw data but no ASCEND_PROFILER_OUTPUT: run `mindspeed-prof analyse`
    not_stopped   no profiler_info*.json: the profiler's stop() never ran
    corrupt       a file is empty, cut short or unreadable (its manifest included), is not
                  a regular file, or holds another rank's capture (copied over this one's)
    missing       an expected rank left no output at all

One exit rule: ``check`` exits 0 only when every expected rank is valid (a cut rank exits 1).
"""

from dataclasses import dataclass, field
from typing import Optional

VALID, CUT, INCOMPLETE, UNPARSED, NOT_STOPPED, CORRUPT, MISSING = (
    "valid", "cut", "incomplete", "unparsed", "not_stopped", "corrupt", "missing")
VERDICTS = (VALID, CUT, INCOMPLETE, UNPARSED, NOT_STOPPED, CORRUPT, MISSING)
_RANK = {v: i for i, v in enumerate(VERDICTS)}


def worst(*verdicts):
    verdicts = [v for v in verdicts if v]
    return max(verdicts, key=_RANK.__getitem__) if verdicts else VALID


def label(verdict):
    return verdict.replace("_", " ")


@dataclass
class RunReport:
    """One capture (an ``*_ascend_pt`` folder or a torch trace)."""

    path: str
    backend: str
    rank: Optional[int] = None
    rank_source: Optional[str] = None
    timestamp: Optional[str] = None
    window: Optional[tuple] = None
    verdict: str = VALID
    problems: list = field(default_factory=list)  # why the verdict is not valid
    warnings: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # error lines from the profiler's logs
    error_count: int = 0
    files: list = field(default_factory=list)  # FileCheck
    settings: Optional[str] = None  # "level1 text", NPU captures only
    steps: list = field(default_factory=list)
    trigger: Optional[str] = None  # why a capture no plan asked for was taken (its manifest
    # window's)

    def fail(self, verdict, problem):
        self.verdict = worst(self.verdict, verdict)
        self.problems.append(problem)

    @classmethod
    def from_dict(cls, data, file_from_dict):
        """The inverse of ``as_dict`` (a node's report, read back by ``merge``)."""
        fields = {k: data[k] for k in ("path", "backend", "rank", "rank_source", "timestamp",
                                       "verdict", "settings", "steps", "problems", "warnings",
                                       "errors", "error_count")}
        window = data.get("window")
        return cls(**fields, window=tuple(window) if window else None,
                   trigger=data.get("trigger"),
                   files=[file_from_dict(f) for f in data["files"]])

    def as_dict(self):
        return {
            "path": self.path, "backend": self.backend, "rank": self.rank,
            "rank_source": self.rank_source, "timestamp": self.timestamp,
            "window": list(self.window) if self.window else None,
            "verdict": self.verdict, "settings": self.settings, "steps": self.steps,
            "trigger": self.trigger,
            "problems": self.problems, "warnings": self.warnings,
            "errors": self.errors, "error_count": self.error_count,
            "files": [f.as_dict() for f in self.files],
        }


@dataclass
class RankReport:
    rank: int
    verdict: str = VALID
    runs: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # from our manifest
    manifest: Optional[str] = None
    manifest_status: Optional[str] = None
    msprof_analyze_pick: Optional[str] = None
    notes: list = field(default_factory=list)  # what is fine but worth saying (no capture)

    @classmethod
    def from_dict(cls, data, file_from_dict):
        fields = {k: data[k] for k in ("rank", "verdict", "manifest", "manifest_status",
                                       "problems", "warnings", "errors", "msprof_analyze_pick")}
        return cls(**fields, notes=list(data.get("notes") or []),
                   runs=[RunReport.from_dict(r, file_from_dict) for r in data["runs"]])

    def as_dict(self):
        return {
            "rank": self.rank, "verdict": self.verdict, "manifest": self.manifest,
            "manifest_status": self.manifest_status, "problems": self.problems,
            "warnings": self.warnings, "errors": self.errors, "notes": self.notes,
            "msprof_analyze_pick": self.msprof_analyze_pick,
            "runs": [r.as_dict() for r in self.runs],
        }


@dataclass
class Report:
    directory: str
    expected_ranks: list = field(default_factory=list)
    ranks: list = field(default_factory=list)  # RankReport, by rank
    unranked: list = field(default_factory=list)  # RunReport whose rank is unknown
    warnings: list = field(default_factory=list)
    covered: Optional[list] = None  # the ranks a node's share held (check_directory(share=...))
    run: Optional[str] = None  # the run judged, when manifests name one (read/jobruns.py)

    @property
    def ok(self):
        checked = self.ranks or self.unranked
        return bool(checked) and all(r.verdict == VALID for r in self.ranks) \
            and all(r.verdict == VALID for r in self.unranked)

    @property
    def exit_code(self):
        return 0 if self.ok else 1

    def rank(self, rank):
        return next((r for r in self.ranks if r.rank == rank), None)

    def counts(self):
        counts = {}
        for item in [*self.ranks, *self.unranked]:
            counts[item.verdict] = counts.get(item.verdict, 0) + 1
        return counts

    @classmethod
    def from_dict(cls, data, file_from_dict):
        return cls(directory=data["directory"], expected_ranks=list(data["expected_ranks"]),
                   ranks=[RankReport.from_dict(r, file_from_dict) for r in data["ranks"]],
                   unranked=[RunReport.from_dict(r, file_from_dict) for r in data["unranked"]],
                   warnings=list(data["warnings"]), run=data.get("run"))

    def as_dict(self):
        data = {
            "directory": self.directory, "ok": self.ok, "exit_code": self.exit_code,
            "expected_ranks": self.expected_ranks, "counts": self.counts(),
            "warnings": self.warnings,
            "ranks": [r.as_dict() for r in self.ranks],
            "unranked": [r.as_dict() for r in self.unranked],
        }
        if self.run is not None:
            data["run"] = self.run
        return data
