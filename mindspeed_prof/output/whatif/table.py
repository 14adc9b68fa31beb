"""The per-op table in memory (one numpy array per column) and on disk (Parquet, the artifact's
column types), read and written with pyarrow alone (no pandas)."""

import dataclasses
from typing import Dict, List

import numpy as np

from ...errors import ConfigError
from ..read.csvrows import setup_pyarrow
from .schema import COLUMN_NAMES

_INTEGER = ("dp_rank", "stage", "rank", "step", "seq_id", "mc", "mb_id", "gmc")


@dataclasses.dataclass
class OpTable:
    """One row per recorded op. ``optype`` holds codes into ``optypes``; times are seconds."""

    dp_rank: np.ndarray
    stage: np.ndarray
    rank: np.ndarray
    step: np.ndarray
    optype: np.ndarray
    optypes: List[str]
    start_ts: np.ndarray
    duration: np.ndarray
    seq_id: np.ndarray
    mc: np.ndarray
    mb_id: np.ndarray
    gmc: np.ndarray

    def __len__(self) -> int:
        return int(self.step.shape[0])

    @classmethod
    def from_columns(cls, columns: Dict[str, object], optypes: List[str]) -> "OpTable":
        arrays = {name: np.asarray(columns[name], dtype=np.int64) for name in _INTEGER}
        return cls(optype=np.asarray(columns["optype"], dtype=np.int64), optypes=list(optypes),
                   start_ts=np.asarray(columns["start_ts"], dtype=np.float64),
                   duration=np.asarray(columns["duration"], dtype=np.float64), **arrays)


def read_parquet(path: str) -> OpTable:
    """TABLE.parquet in the paper's schema; a missing column or a null is a usage error."""
    pa = setup_pyarrow()  # with pandas kept out (pyarrow would import it: 0.15 s)
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:  # ParquetFile, not read_table: its dataset layer imports pandas (0.35 s)
        handle = pq.ParquetFile(path)
        schema = handle.schema_arrow
    except (OSError, pa.ArrowException) as exc:
        raise ConfigError(f"TABLE {path}: not a readable Parquet file ({type(exc).__name__}); "
                          f"give a table written by `mindspeed-prof export --format "
                          f"straggler-analysis` or the artifact's trace-*.parquet.") from None
    missing = [name for name in COLUMN_NAMES if name not in schema.names]
    if missing:
        raise ConfigError(f"TABLE {path}: no column {missing[0]!r}; the table needs "
                          f"{', '.join(COLUMN_NAMES)}.")
    try:
        table = handle.read(columns=list(COLUMN_NAMES))
    except (OSError, pa.ArrowException) as exc:
        raise ConfigError(f"TABLE {path}: cannot be read ({type(exc).__name__}: {exc}).") from None
    columns: Dict[str, object] = {}
    optypes: List[str] = []
    for name in COLUMN_NAMES:
        column = table.column(name)
        if column.null_count:
            raise ConfigError(f"TABLE {path}: column {name!r} has {column.null_count} empty "
                              f"values; every row needs all of {', '.join(COLUMN_NAMES)}.")
        if name == "optype":
            column = column.combine_chunks()
            if not pa.types.is_dictionary(column.type):
                column = pc.dictionary_encode(column)
            if not pa.types.is_string(column.type.value_type) and not pa.types.is_large_string(
                    column.type.value_type):
                raise ConfigError(f"TABLE {path}: column 'optype' must hold text (op type "
                                  f"names), not {column.type.value_type}.")
            optypes = [str(value) for value in column.dictionary.to_pylist()]
            columns[name] = column.indices.to_numpy()
            continue
        try:
            columns[name] = column.combine_chunks().to_numpy()  # no nulls: zero-copy
        except (pa.ArrowException, ValueError) as exc:
            raise ConfigError(f"TABLE {path}: column {name!r} is not numeric ({exc}).") from None
    return OpTable.from_columns(columns, optypes)


def write_parquet(table: OpTable, path: str) -> None:
    """``table`` with the artifact's exact column types (``schema.COLUMNS``)."""
    pa = setup_pyarrow()
    import pyarrow.parquet as pq

    kinds = {"dp_rank": pa.int8(), "stage": pa.int8(), "rank": pa.int16(), "step": pa.int64(),
             "seq_id": pa.int32(), "mc": pa.int8(), "mb_id": pa.int8(), "gmc": pa.int16()}
    arrays = []
    for name in COLUMN_NAMES:
        if name == "optype":
            arrays.append(pa.DictionaryArray.from_arrays(
                pa.array(table.optype, type=pa.int8()), pa.array(table.optypes, type=pa.string())))
        elif name in ("start_ts", "duration"):
            arrays.append(pa.array(getattr(table, name), type=pa.float32()))
        else:
            arrays.append(pa.array(getattr(table, name), type=kinds[name]))
    pq.write_table(pa.Table.from_arrays(arrays, names=list(COLUMN_NAMES)), path)
