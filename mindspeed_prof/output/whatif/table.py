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
    """One row per recorded op. ``optype`` holds codes into ``optypes``; times are seconds.
    Columns keep the width they were stored with."""

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
        # integers keep their stored width (int8/int16 in the artifact's files): memory per row
        arrays = {name: _integers(columns[name]) for name in _INTEGER}
        return cls(optype=_integers(columns["optype"]), optypes=list(optypes),
                   start_ts=_floats(columns["start_ts"]), duration=_floats(columns["duration"]),
                   **arrays)



def _floats(values: object) -> np.ndarray:
    array = np.asarray(values)  # float32 stays float32 (the artifact's files), else float64
    return array if array.dtype in (np.float32, np.float64) else array.astype(np.float64)


def _integers(values: object) -> np.ndarray:
    array = np.asarray(values)
    return array if array.dtype.kind in "iu" else array.astype(np.int64)


def read_parquet(path: str) -> OpTable:
    """TABLE.parquet in the paper's schema; a missing column or a null is a usage error."""
    pa = setup_pyarrow()  # with pandas kept out (pyarrow would import it: 0.15 s)
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
    columns: Dict[str, object] = {}
    optypes: List[str] = []
    for name in COLUMN_NAMES:  # one column at a time: its Arrow buffers go once copied out
        try:
            column = handle.read(columns=[name]).column(0)
        except (OSError, pa.ArrowException) as exc:
            raise ConfigError(f"TABLE {path}: cannot be read ({type(exc).__name__}: "
                              f"{exc}).") from None
        if column.null_count:
            raise ConfigError(f"TABLE {path}: column {name!r} has {column.null_count} empty "
                              f"values; every row needs all of {', '.join(COLUMN_NAMES)}.")
        if name == "optype":
            columns[name] = _codes(column, optypes, path)
            continue
        try:  # no nulls: each chunk is a zero-copy view, concatenated into one array we own
            parts = [chunk.to_numpy() for chunk in column.chunks]
        except (pa.ArrowException, ValueError) as exc:
            raise ConfigError(f"TABLE {path}: column {name!r} is not numeric ({exc}).") from None
        if any(part.dtype.kind not in "iuf" for part in parts):
            raise ConfigError(f"TABLE {path}: column {name!r} is not numeric.")
        columns[name] = np.concatenate(parts) if parts else np.zeros(0)
        del column, parts
    return OpTable.from_columns(columns, optypes)


def _codes(column: object, optypes: List[str], path: str) -> np.ndarray:
    """Op type codes into ``optypes`` (filled here), chunk by chunk: each chunk's own
    dictionary is mapped onto the one list, never a string per row."""
    import pyarrow as pa

    index: Dict[str, int] = {}
    parts = []
    for chunk in column.chunks:  # type: ignore[attr-defined]
        if not pa.types.is_dictionary(chunk.type):
            import pyarrow.compute as pc  # only for plain text: 30 ms to import

            chunk = pc.dictionary_encode(chunk)
        if not (pa.types.is_string(chunk.type.value_type)
                or pa.types.is_large_string(chunk.type.value_type)):
            raise ConfigError(f"TABLE {path}: column 'optype' must hold text (op type names), "
                              f"not {chunk.type.value_type}.")
        mapping = np.array([index.setdefault(str(v), len(index))
                            for v in chunk.dictionary.to_pylist()] or [0], dtype=np.int16)
        parts.append(mapping[chunk.indices.to_numpy().astype(np.int64)])
    optypes.extend(index)  # insertion order is code order
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)


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
