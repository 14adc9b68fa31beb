"""The per-op table in memory (one numpy array per column) and on disk (Parquet, the artifact's
column types), read and written with pyarrow alone (no pandas)."""

import dataclasses
from typing import Any, Callable, Dict, Iterator, List

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


BATCH_ROWS = 1 << 18  # rows per piece read: ~8 MB of columns, whatever the table's size


def parquet_batches(path: str) -> Callable[[], Iterator[OpTable]]:
    """TABLE.parquet in the paper's schema, as a callable that reads it in pieces (each call
    reads it again from the start); a missing column is a usage error here, a null or a column
    of the wrong kind when its piece is read."""
    pa = setup_pyarrow()  # with pandas kept out (pyarrow would import it: 0.15 s)
    import pyarrow.parquet as pq

    try:  # ParquetFile, not read_table: its dataset layer imports pandas (0.35 s)
        schema = pq.ParquetFile(path).schema_arrow
    except (OSError, pa.ArrowException) as exc:
        raise ConfigError(f"TABLE {path}: not a readable Parquet file ({type(exc).__name__}); "
                          f"give a table written by `mindspeed-prof export --format "
                          f"straggler-analysis` or the artifact's trace-*.parquet.") from None
    missing = [name for name in COLUMN_NAMES if name not in schema.names]
    if missing:
        raise ConfigError(f"TABLE {path}: no column {missing[0]!r}; the table needs "
                          f"{', '.join(COLUMN_NAMES)}.")

    def pieces() -> Iterator[OpTable]:
        try:
            with pq.ParquetFile(path) as handle:
                # one thread: pyarrow's decoding threads each keep a malloc arena of freed
                # pages (+25 MB resident at 1.2M rows), for no gain on a table this size
                for batch in handle.iter_batches(batch_size=BATCH_ROWS, use_threads=False,
                                                 columns=list(COLUMN_NAMES)):
                    yield _piece(batch, path)
        except (OSError, pa.ArrowException) as exc:
            raise ConfigError(f"TABLE {path}: cannot be read ({type(exc).__name__}: "
                              f"{exc}).") from None
    return pieces


def _piece(batch: Any, path: str) -> OpTable:
    import pyarrow as pa

    columns: Dict[str, object] = {}
    optypes: List[str] = []
    for name in COLUMN_NAMES:
        column = batch.column(name)
        if column.null_count:
            raise ConfigError(f"TABLE {path}: column {name!r} has {column.null_count} empty "
                              f"values; every row needs all of {', '.join(COLUMN_NAMES)}.")
        if name == "optype":
            if not pa.types.is_dictionary(column.type):
                import pyarrow.compute as pc  # only for plain text: 30 ms to import

                column = pc.dictionary_encode(column)
            if not (pa.types.is_string(column.type.value_type)
                    or pa.types.is_large_string(column.type.value_type)):
                raise ConfigError(f"TABLE {path}: column 'optype' must hold text (op type "
                                  f"names), not {column.type.value_type}.")
            optypes = [str(v) for v in column.dictionary.to_pylist()]
            columns[name] = column.indices.to_numpy()
            continue
        try:  # no nulls: a zero-copy view
            values = column.to_numpy()
        except (pa.ArrowException, ValueError) as exc:
            raise ConfigError(f"TABLE {path}: column {name!r} is not numeric ({exc}).") from None
        if values.dtype.kind not in "iuf":
            raise ConfigError(f"TABLE {path}: column {name!r} is not numeric.")
        columns[name] = values
    return OpTable.from_columns(columns, optypes)


def read_parquet(path: str) -> OpTable:
    """The whole table in memory (its pieces joined, op type codes onto one list)."""
    index: Dict[str, int] = {}
    parts: List[OpTable] = []
    for piece in parquet_batches(path)():
        mapping = np.array([index.setdefault(n, len(index)) for n in piece.optypes] or [0])
        piece.optype = mapping[piece.optype.astype(np.int64)]
        parts.append(piece)
    names = [f.name for f in dataclasses.fields(OpTable) if f.name != "optypes"]
    return OpTable(**{n: np.concatenate([getattr(p, n) for p in parts]) if parts
                      else np.zeros(0) for n in names}, optypes=list(index))


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
    # row groups of one piece each: a reader holds one decoded row group at a time
    pq.write_table(pa.Table.from_arrays(arrays, names=list(COLUMN_NAMES)), path,
                   row_group_size=BATCH_ROWS)
