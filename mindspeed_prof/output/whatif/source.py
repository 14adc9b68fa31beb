"""What ``whatif`` reads: a table in the paper's schema (with its metadata, given, found beside
it or read off the table), an exported folder, or a profiled run's schedule marks."""

import glob
import os
from typing import Iterable, List, Optional, Tuple, Union

import numpy as np

from ...errors import ConfigError
from .schema import JobMeta, read_meta
from .grid import Batches
from .table import OpTable, parquet_batches

TRACE_PREFIX, META_PREFIX = "trace-", "meta-"


def load(path: str, meta_path: Optional[str]) -> Tuple[Union[OpTable, Batches], JobMeta, List[str]]:
    """The rows (a table in memory, or a Parquet file's pieces), the job's layout, notes."""
    if not os.path.exists(path):
        raise ConfigError(f"DIR|TABLE {path} does not exist; give a profiled run's "
                          f"--profile-save-path or a table in the straggler-analysis schema.")
    if os.path.isdir(path):
        tables = sorted(glob.glob(os.path.join(glob.escape(path), TRACE_PREFIX + "*.parquet")))
        if len(tables) > 1:
            raise ConfigError(f"DIR {path} holds {len(tables)} tables "
                              f"({os.path.basename(tables[0])}, ...); give one of them.")
        if not tables:
            from .capture import from_capture

            table, meta, notes = from_capture(path)
            if meta_path is not None:
                meta = read_meta(meta_path)
            return table, meta, notes
        path = tables[0]
    pieces = parquet_batches(path)
    if meta_path is None:
        meta_path = _beside(path)
    if meta_path is not None:
        return pieces, read_meta(meta_path), []
    meta = inferred_meta(pieces(), os.path.splitext(os.path.basename(path))[0])
    return pieces, meta, [f"no --meta: the layout was read off the table (DP {meta.dp_size}, PP "
                         f"{meta.pp_size}, {meta.vpp_size} chunks per stage; TP and context "
                         f"parallel taken as 1)."]


def _beside(path: str) -> Optional[str]:
    name = os.path.basename(path)
    if not name.startswith(TRACE_PREFIX):
        return None
    trial = name[len(TRACE_PREFIX):].rsplit(".", 1)[0]
    for ext in (".yaml", ".yml"):
        candidate = os.path.join(os.path.dirname(path), f"{META_PREFIX}{trial}{ext}")
        if os.path.isfile(candidate):
            return candidate
    return None


def inferred_meta(pieces: Iterable[OpTable], trial: str) -> JobMeta:
    """The layout a table shows: DP and PP sizes, chunks per stage (TP and CP taken as 1)."""
    dp = pp = vpp = 1
    for table in pieces:
        if len(table):
            dp = max(dp, int(table.dp_rank.max()) + 1)
            pp = max(pp, int(table.stage.max()) + 1)
            vpp = max(vpp, int(np.max(table.mc, initial=0)) + 1)
    return JobMeta(trial_name=trial or "table", dp_size=max(dp, 1), pp_size=max(pp, 1),
                   vpp_size=max(vpp, 1), world_size=max(dp, 1) * max(pp, 1))
