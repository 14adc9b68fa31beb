"""What ``summary`` found: one ``RankSummary`` per (rank, backend), and the ``Summary``."""

import statistics
from dataclasses import dataclass, field
from typing import Optional

from ..read import columns


@dataclass
class RankSummary:
    rank: int
    backend: Optional[str] = None
    sources: list = field(default_factory=list)
    steps: list = field(default_factory=list)  # {"step", "device", components..., "step_time"}
    kernels: dict = field(default_factory=dict)  # (name, type) -> Item
    op_types: dict = field(default_factory=dict)
    op_types_source: Optional[str] = None
    ops: dict = field(default_factory=dict)  # torch operators by self time
    requests: list = field(default_factory=list)  # inference: one row per request (requests.py)
    engine_windows: list = field(default_factory=list)  # dynamic engine (engine_steps.py)
    notes: list = field(default_factory=list)
    basis: Optional[str] = None  # what the step breakdown was computed from
    # torch: each collective's work [step, name, group, bytes, start_us, end_us] on this rank's
    # clock (summary/collectives.py), for output/waits
    collectives: list = field(default_factory=list)
    spans: dict = field(default_factory=dict)  # torch: N -> (start_us, end_us), same clock

    def breakdown(self):
        """Mean of each component over the profiled steps."""
        keys = [k for k in (*columns.STEP_COMPONENTS, "step_time")
                if any(s.get(k) is not None for s in self.steps)]
        return {k: statistics.fmean([s[k] for s in self.steps if s.get(k) is not None])
                for k in keys}

    @property
    def step_time(self):
        return self.breakdown().get("step_time")

    @property
    def has_numbers(self):
        """True when any of this rank's captures could be read into a number."""
        return bool(self.steps or self.kernels or self.ops or self.op_types or self.requests)


@dataclass
class Summary:
    directory: str
    top: int = 10
    ranks: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    run: Optional[str] = None  # the run summarised, when manifests name one (read/jobruns.py)
    waits: Optional[dict] = None  # who makes everyone wait (output/waits), where traces say
    # the rank-pair matrix of NPU captures and their slow links (output/waits/links.py)
    communication_matrix: Optional[dict] = None
    link_reads: list = field(default_factory=list)  # [rank, capture, commmatrix.read answer]
    places: dict = field(default_factory=dict)  # rank -> {"parallel", "hostname"} (manifests)

    def rank(self, rank):
        return next((r for r in self.ranks if r.rank == rank), None)

    @property
    def summarised(self):
        """The ranks with numbers: ``summary`` exits 0 only when there is one."""
        return [r for r in self.ranks if r.has_numbers]
