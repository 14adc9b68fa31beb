"""The body of a CSV table: rows of the wanted columns, every row's width checked.

pyarrow's CSV reader does the work (C++, streamed in ``CHUNK_BYTES`` blocks, several threads):
it splits quoted and multi-line fields (call stacks in operator_details.csv) and hands each row
of the wrong width to a handler instead of failing. Measured on the 1 GB benchmark set it
counts rows 1.7x and sums kernels 2.7x as fast as the hand-written splitter it replaced, and
polars, faster still, does not check widths (a short row becomes nulls), so it cannot tell a
damaged table from a good one.

What pyarrow does not check is checked on the bytes on their way in: NUL bytes and UTF-8 in
every column, ``\\r\\n`` folded to ``\\n`` (inside quoted values too). Anything odd (a ragged
row, a lone ``\\r``, a parse error) sends the table through ``_exact``, a ``csv``-module pass
that names the line: a stray ragged row (an upstream sample has one) is skipped and counted;
a file that ends inside a row, or has many bad rows, is corrupt.
"""

import csv
import itertools
import os
import sys

from .. import parallel
from ..deps import need
from .errors import CorruptFile
from .scratch import BoolScratch

# 256 KiB: pyarrow holds a few blocks per thread; a reader process peaked 36 MB lower than
# with 1 MiB blocks (with the system allocator, below). Bigger blocks cost less CPU now that
# pyarrow parses the durations (31 MB kernel_details.csv: 55 / 46 / 44 ms at 256 KiB / 512 KiB /
# 1 MiB, min of 15), but kernel sums add one partial sum per block: another block size changes
# their last digits, and the readers' numbers stay what they were.
CHUNK_BYTES = 1 << 18
MAX_RECORD_BYTES = 1 << 26
# Rows of the wrong width a table may have before it counts as corrupt (or 1% of its rows).
MAX_BAD_ROWS = 10
EXACT_BATCH_ROWS = 1 << 16
THREADS_MIN_BYTES = 16 << 20
# Below this the ``csv`` module reads a table: it costs less than setting pyarrow up (0.03
# against 0.55 ms for an 11-row op_statistic.csv; check reads ~6 such tables a rank), about as
# much at 21 KB (0.78 against 0.67 ms), and a summary answered from the cache then imports
# neither pyarrow nor numpy (0.1 s of a 64-rank summary's 0.4).
SMALL_TABLE_BYTES = 64 << 10


class _Odd(Exception):
    """The fast pass met something only the exact pass can judge."""


class NotNumeric(Exception):
    """A column asked for as numbers holds text pyarrow does not read as one: read the table
    again with that column as text (the batches given so far are to be dropped)."""


class RowReader:
    """Rows of ``path`` from byte ``start`` (the line after the header) to the end."""

    def __init__(self, path, start, width, positions):
        self.path = path
        self.start = start
        self.width = width
        self.positions = positions
        self.rows = 0
        self.bad_rows = 0
        self.first_bad = None

    def __iter__(self):
        """Tuples of the wanted fields (None for a column the file lacks)."""
        wanted = sorted({p for p in self.positions if p is not None})
        try:
            for batch in self._fast(wanted):
                values = {p: batch.column(str(p)).to_pylist() for p in wanted}
                none = [None] * batch.num_rows
                yield from zip(*(values[p] if p is not None else none
                                 for p in self.positions))
                self.rows += batch.num_rows
        except _Odd:
            yield from self._exact(skip=self.rows)
            return
        self._judge()

    def count(self):
        """Check every record's width; returns the number of rows."""
        try:
            for batch in self._fast([0]):
                self.rows += batch.num_rows
        except _Odd:
            for _ in self._exact(skip=None):
                pass
            return self.rows
        self._judge()
        return self.rows

    def batches(self, wanted, coded=(), numeric=()):
        """pyarrow RecordBatches of the columns at ``wanted`` (named by position, as text;
        those at ``coded`` dictionary-encoded by the parser, a cheaper form for columns that
        repeat, such as kernel names; those at ``numeric`` as float64, null where pyarrow reads
        no value: its conversion, in the parser, costs less than a cast of the text); when the
        fast pass cannot judge the table, the same from ``csv`` rows, as plain text. Raises
        ``NotNumeric`` when a ``numeric`` column holds text that is not a number."""
        pa = need("pyarrow")

        try:
            for batch in self._fast(wanted, coded, numeric):
                yield batch
                self.rows += batch.num_rows
        except _Odd:
            if numeric:
                raise NotNumeric() from None  # the exact pass gives text: ask for text
            self.positions = wanted
            names = [str(p) for p in wanted]
            rows = self._exact(skip=self.rows)
            while True:
                block = list(itertools.islice(rows, EXACT_BATCH_ROWS))
                if not block:
                    return
                yield pa.RecordBatch.from_arrays(
                    [pa.array([r[i] for r in block], pa.string()) for i in range(len(wanted))],
                    names=names)
        self._judge()

    def _judge(self):
        """After a fast pass: ragged rows are rare, so the exact pass names the first one."""
        if self.bad_rows:
            for _ in self._exact(skip=None):
                pass
        else:
            self._finish()

    def _fast(self, wanted, coded=(), numeric=()):
        """pyarrow over the checked bytes; raises ``_Odd`` for the exact pass."""
        size = _size(self.path)
        if size is not None and size - self.start < SMALL_TABLE_BYTES:
            raise _Odd()  # the exact pass reads it, and costs less
        pacsv = need("pyarrow.csv")

        pa = setup_pyarrow()
        source = _Checked(self.path, self.start)
        coded_text = pa.dictionary(pa.int32(), pa.string())
        names = [str(i) for i in range(self.width)]
        read = pacsv.ReadOptions(use_threads=self._threads(size), block_size=CHUNK_BYTES,
                                 column_names=names)
        parse = pacsv.ParseOptions(newlines_in_values=True, invalid_row_handler=self._skip)
        convert = pacsv.ConvertOptions(include_columns=[names[p] for p in wanted],
                                       column_types={names[p]: coded_text if p in coded
                                                     else pa.float64() if p in numeric
                                                     else pa.string() for p in wanted})
        self._fast_bad = 0
        try:
            with pacsv.open_csv(pa.PythonFile(source, mode="r"), read_options=read,
                                parse_options=parse, convert_options=convert) as reader:
                for batch in reader:
                    # pyarrow reads a block before it yields its rows: damage is seen in time
                    if source.error:
                        raise source.error
                    if source.lone_cr:
                        raise _Odd()
                    yield batch
        except pa.ArrowException:
            if source.error:
                raise source.error from None
            raise _Odd() from None
        finally:
            source.close()
        if source.error:
            raise source.error
        if source.lone_cr or source.quotes % 2:  # pyarrow closes a quote the file left open
            raise _Odd()
        self.bad_rows = self._fast_bad

    def _threads(self, size):
        """pyarrow's threads for a big table only: a small one is read before they help, and a
        process that ends just after a threaded read aborted at exit now and then ("terminate
        called without an active exception", 2 in ~150 `summary` runs on cached captures)."""
        return size is not None and size >= THREADS_MIN_BYTES and parallel.threads_allowed()

    def _skip(self, row):
        self._fast_bad += 1
        return "skip"

    def _exact(self, skip):
        """Rows by the ``csv`` module, line numbers exact; the first ``skip`` good rows are
        counted, not yielded (the fast pass already gave them)."""
        self.rows, self.bad_rows, self.first_bad = 0, 0, None
        lines = _Lines(self.path, self.start)
        pick = _picker(self.positions, lines)
        reader = csv.reader(lines)
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                if lines.eof and lines.open_quote:
                    break
                raise CorruptFile(f"line {lines.line}: {exc}") from None
            if not row:
                continue
            if len(row) != self.width:
                last = lines.eof and not lines.ended
                self._bad(lines.line, len(row), last and not lines.open_quote)
                continue
            self.rows += 1
            if skip is None or self.rows > skip:
                yield pick(row)
        if lines.open_quote:
            raise CorruptFile(f"a quoted field opened after line {lines.quote_line} is never "
                              f"closed: the file was cut short")
        self._finish()

    def _finish(self):
        if self.rows == 0 and not self.bad_rows:
            raise CorruptFile("header only, no rows (torch_npu never writes an empty table: "
                              "the file was cut short)")
        # A stray ragged row (upstream samples have one) leaves the table usable; many do not.
        if self.bad_rows > max(MAX_BAD_ROWS, self.rows // 100):
            raise CorruptFile(f"{self.bad_rows} rows have the wrong number of columns "
                              f"(first: {self.first_bad})")

    def _bad(self, line, got, cut_short):
        """A row of the wrong width: the end of a cut file is fatal, a stray row is skipped."""
        if cut_short:
            raise CorruptFile(f"line {line} has {got} of {self.width} columns and no line end: "
                              f"the file was cut short")
        self.bad_rows += 1
        if self.first_bad is None:
            self.first_bad = f"line {line} has {got} columns, the header has {self.width}"


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return None  # the pass that opens it says why


def setup_pyarrow():
    """pyarrow as the CLI's readers want it, once per process; returns the module.

    - malloc instead of pyarrow's mimalloc, which kept ~20 MB more per reader process resident
      after each block; the CLI's readers are pyarrow's only user in the process.
    - No pandas: pyarrow imports it (when installed, as msprof-analyze brings it) the first
      time an array meets Python objects or numpy, to ask whether they are pandas objects. That
      was 145 ms before any summary could start, ~17 % of a 1 GB summary. pyarrow asks once
      and remembers the answer, so pandas is hidden for that one question only.
    """
    pa = need("pyarrow")
    need("numpy")  # pyarrow imports without it, then fails on its first array

    global _pyarrow_ready
    if _pyarrow_ready:
        return pa
    if pa.default_memory_pool().backend_name != "system":
        pa.set_memory_pool(pa.system_memory_pool())
    hide = "pandas" not in sys.modules and _NoPandas()
    if hide:
        sys.meta_path.insert(0, hide)
    try:
        pa.array([0]).to_numpy()  # pyarrow's one pandas probe
    finally:
        if hide:
            sys.meta_path.remove(hide)
    _pyarrow_ready = True
    return pa


_pyarrow_ready = False


class _NoPandas:
    """An import finder under which ``import pandas`` fails (None in sys.modules would not do:
    pyarrow's compiled import takes whatever sys.modules holds)."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


class _Checked:
    """The body's bytes for pyarrow, checked for what pyarrow lets through: NUL bytes, bad
    UTF-8 (in any column, not only the ones read), ``\\r\\n`` (folded to ``\\n``, as ``csv``
    would read it) and a lone ``\\r`` (pyarrow would end a row there, ``csv`` does not).

    Each check is one C-speed scan of a block (ASCII text needs no UTF-8 decoding); lines
    are counted only to name the line of a fault, by reading the file again up to it."""

    def __init__(self, path, start):
        self._path, self._start = path, start
        self._handle = open(path, "rb")
        self._handle.seek(start)
        self._offset = start  # file offset of the next byte handed to _scan
        self._carry = b""  # an unfinished UTF-8 sequence or a \r that may precede a \n
        self.error = None
        self.lone_cr = False
        self.quotes = 0
        self.closed = False
        self._scratch = BoolScratch()

    def read(self, size=-1):
        if self.error is not None:
            return b""
        data = self._handle.read(CHUNK_BYTES if size is None or size < 0 else size)
        raw = self._carry + data if self._carry else data
        self._carry = b""
        keep = _unfinished_tail(raw) if data else 0
        if keep:
            raw, self._carry = raw[:-keep], raw[-keep:]
        return self._scan(raw)

    def _scan(self, raw):
        if b"\x00" in raw:
            self._fault(raw.index(b"\x00"), "NUL bytes in the text")
        elif not raw.isascii():
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self._fault(exc.start, "not UTF-8 text")
        if self.error is not None:
            return b""
        self._offset += len(raw)
        self.quotes += self._quotes(raw)
        if b"\r" in raw:
            folded = raw.replace(b"\r\n", b"\n")
            self.lone_cr = self.lone_cr or b"\r" in folded
            raw = folded
        return raw

    def _quotes(self, raw):
        """How many ``"`` bytes ``raw`` holds. numpy compares many bytes at a time (into a
        kept array, scratch.py); ``bytes.count`` goes byte by byte, and was two thirds of this
        scan's CPU (10 of 14.7 ms per 31 MB)."""
        numpy = need("numpy")

        [found] = self._scratch.views(len(raw))
        numpy.equal(numpy.frombuffer(raw, numpy.uint8), 0x22, out=found)
        return int(numpy.count_nonzero(found))

    def _fault(self, index, what):
        """Record the fault at ``index`` of the block being scanned, naming its line."""
        lines, left = 1, self._offset + index - self._start  # the header is line 1
        with open(self._path, "rb") as handle:
            handle.seek(self._start)
            while left > 0:
                data = handle.read(min(left, CHUNK_BYTES))
                if not data:
                    break
                lines += data.count(b"\n")
                left -= len(data)
        self.error = CorruptFile(f"line {lines + 1}: {what}")

    def close(self):
        self.closed = True
        self._handle.close()

    def readable(self):
        return True

    def seekable(self):
        return False

    def writable(self):
        return False


def _unfinished_tail(raw):
    """How many bytes at the end of ``raw`` belong with the next block: a trailing ``\\r``,
    or the start of a UTF-8 sequence cut by the read."""
    if raw.endswith(b"\r"):
        return 1
    for back in range(1, min(4, len(raw)) + 1):
        byte = raw[-back]
        if byte < 0x80:
            return 0
        if byte >= 0xC0:  # a lead byte: is its sequence complete?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return back if need > back else 0
    return 0


class _Lines:
    """Decoded lines for ``csv.reader``, counting them and naming NUL / UTF-8 damage."""

    def __init__(self, path, start):
        self._path, self._start = path, start
        self.line = 1
        self.eof = False
        self.ended = True  # the last line read had a line end
        self.lone_cr = False
        self._quotes = 0
        self.quote_line = None
        self._it = self._lines()

    @property
    def open_quote(self):
        return self._quotes % 2 == 1

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._it)

    def _lines(self):
        with open(self._path, "rb") as handle:
            handle.seek(self._start)
            for raw in handle:
                if len(raw) > MAX_RECORD_BYTES:
                    raise CorruptFile(f"line {self.line + 1}: a line runs on for "
                                      f"{MAX_RECORD_BYTES >> 20} MB")
                if b"\x00" in raw:
                    raise CorruptFile(f"line {self.line + 1}: NUL bytes in the text")
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise CorruptFile(f"line {self.line + 1}: not UTF-8 text") from None
                self.line += 1
                self.ended = text.endswith("\n")
                quotes = text.count('"')
                if quotes % 2 and not self.open_quote:
                    self.quote_line = self.line - 1
                self._quotes += quotes
                self.eof = not self.ended or not handle.peek(1)
                if text.endswith("\r\n"):
                    text = text[:-2] + "\n"
                if "\r" in text.rstrip("\n"):
                    # a lone \r is text here (csv would refuse it): NUL, known absent, stands in
                    self.lone_cr = True
                    text = text[:-1].replace("\r", "\x00") + text[-1]
                yield text
        self.eof = True


def _picker(positions, lines):
    """parts -> tuple of the wanted fields, None for a column the file lacks."""
    def pick(parts):
        if lines.lone_cr:
            parts = [part.replace("\x00", "\r") for part in parts]
        return tuple(None if p is None else parts[p] for p in positions)
    return pick
