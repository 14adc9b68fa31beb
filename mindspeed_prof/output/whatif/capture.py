"""The per-op table of a profiled run, from its schedule marks (filled in below)."""

from typing import List, Tuple

from ...errors import ConfigError
from .schema import JobMeta
from .table import OpTable


def from_capture(directory: str) -> Tuple[OpTable, JobMeta, List[str]]:
    raise ConfigError(f"DIR {directory}: no schedule marks.")
