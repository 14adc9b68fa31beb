"""The body of a CSV table, block by block: rows of the wanted columns, every width checked.

Rows without quotes, by far the most common, are split with ``str.split`` on only the columns
asked for; rows with quotes go through ``csv``, which also handles fields spanning lines
(call stacks in operator_details.csv). A stray ragged row is skipped and counted (an upstream
sample has one); a file that ends inside a row, or has many bad rows, is corrupt.
"""

import csv
import io
import operator

from .errors import CorruptFile

# 1 MiB: a block's lines are all alive at once; 4 MiB cost a reader 31 MiB more and ran 11 %
# slower on a 265 MB kernel_details.csv set (benchmarks/ figure 5).
CHUNK_BYTES = 1 << 20
MAX_RECORD_BYTES = 1 << 26
# Rows of the wrong width a table may have before it counts as corrupt (or 1% of its rows).
MAX_BAD_ROWS = 10
_SKIP = object()


class RowReader:
    """Walks the body in blocks of whole records (cut where every quote is closed)."""

    def __init__(self, path, start, width, positions, end=None):
        """Rows of ``path`` between byte ``start`` (a line start) and ``end`` (a line start,
        or None for the end of the file)."""
        self.path = path
        self.start = start
        self.end = end
        self.width = width
        self.positions = positions
        present = [p for p in positions if p is not None]
        self.split_at = (max(present) + 1) if present else 1
        self.pick = _picker(positions)
        self.line = 1  # lines read so far, the header included
        self.rows = 0
        self.bad_rows = 0
        self.first_bad = None

    def __iter__(self):
        for text, cut_short in self._blocks():
            yield from self._rows(text, cut_short)
        self._finish()

    def count(self):
        """Check every record's width without splitting rows; returns the number of rows."""
        for text, cut_short in self._blocks():
            records = self._whole_records(text, cut_short)
            if records is not None:
                self.line += text.count("\n")
                self.rows += records
            else:  # something is off: the slow pass names the line (or accepts blank lines)
                for _ in self._rows(text, cut_short):
                    pass
        self._finish()
        return self.rows

    def _whole_records(self, text, cut_short):
        """The block's record count when every record has the header's width, else None.

        Splitting on quotes alternates outside/inside quoted fields ("" escapes included),
        so the even pieces hold every separator and every record end.
        """
        outside = "".join(text.split('"')[0::2]) if '"' in text else text
        records = outside.count("\n") + (1 if cut_short else 0)
        if outside.count(",") != records * (self.width - 1):
            return None
        if outside is not text and outside.count("\n") != text.count("\n"):
            return None  # a quoted field spans lines: only csv can split those records
        return records

    def _finish(self):
        if self.rows == 0 and not self.bad_rows and self.end is None:
            raise CorruptFile("header only, no rows (torch_npu never writes an empty table: "
                              "the file was cut short)")
        # A stray ragged row (upstream samples have one) leaves the table usable; many do not.
        if self.bad_rows > max(MAX_BAD_ROWS, self.rows // 100):
            raise CorruptFile(f"{self.bad_rows} rows have the wrong number of columns "
                              f"(first: {self.first_bad})")

    def _blocks(self):
        """(text, cut_short) per block; cut_short: the file ends without a line end."""
        with open(self.path, "rb") as handle:
            handle.seek(self.start)
            left = None if self.end is None else self.end - self.start
            carry = b""
            while True:
                data = handle.read(CHUNK_BYTES if left is None else min(CHUNK_BYTES, left))
                if left is not None:
                    left -= len(data)
                buf = carry + data if carry else data
                if not data:
                    if buf:
                        text = self._decode(buf)
                        if text.count('"') % 2:
                            raise CorruptFile(f"a quoted field opened after line {self.line} "
                                              f"is never closed: the file was cut short")
                        yield text, not text.endswith("\n")
                    return
                cut = _even_cut(buf)
                if cut == 0:
                    if len(buf) > MAX_RECORD_BYTES:
                        raise CorruptFile(f"line {self.line + 1}: a quoted field runs on for "
                                          f"{MAX_RECORD_BYTES >> 20} MB: unbalanced quotes")
                    carry = buf
                    continue
                carry = buf[cut:]
                yield self._decode(buf[:cut]), False

    def _decode(self, raw):
        if b"\x00" in raw:
            where = self.line + raw.count(b"\n", 0, raw.index(b"\x00")) + 1
            raise CorruptFile(f"line {where}: NUL bytes in the text")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            where = self.line + raw.count(b"\n", 0, exc.start) + 1
            raise CorruptFile(f"line {where}: not UTF-8 text") from None
        # csv.writer ends lines with \r\n; one replace here spares a strip per row
        return text.replace("\r\n", "\n") if "\r" in text else text

    def _rows(self, text, cut_short):
        """Line by line, width-checked; csv takes over for quoted and multi-line fields."""
        lines = text.split("\n")
        if not cut_short:
            lines.pop()  # the empty string after the last line end
        out, quoted = [], []
        commas, split_at, pick = self.width - 1, self.split_at, self.pick
        base = self.line
        for offset, line in enumerate(lines, 1):
            first_quote = line.find('"')
            if first_quote < 0:
                if not line:
                    continue
                if line.count(",") != commas:
                    self._bad(base + offset, line.count(",") + 1,
                              cut_short and offset == len(lines))
                    continue
                out.append(pick(line.split(",", split_at)))
                continue
            if line.count('"') % 2:
                yield from self._with_csv(text, base, cut_short)  # a field spans lines
                return
            if line.count(",") != commas:
                # Splitting on quotes alternates outside/inside a quoted field ("" escapes
                # included): the commas that separate fields are those of the even pieces.
                outside = line.split('"')[0::2]
                if ",".join(outside).count(",") - len(outside) + 1 != commas:
                    quoted.append((len(out), base + offset, line))  # csv names the problem
                    out.append(None)
                    continue
            parts = line[:first_quote].split(",", split_at)
            if len(parts) > split_at:
                out.append(pick(parts))  # every wanted column lies before the first quote
            else:
                quoted.append((len(out), base + offset, line))
                out.append(None)
        if quoted:
            # one csv pass over the lines that need it, then back into file order
            rows = csv.reader([line for _, _, line in quoted])
            for (slot, number_, _), row in zip(quoted, rows):
                if len(row) != self.width:
                    self._bad(number_, len(row), cut_short and number_ == base + len(lines))
                    out[slot] = _SKIP
                    continue
                out[slot] = pick(row)
            out = [row for row in out if row is not _SKIP]
        self.line = base + len(lines)
        self.rows += len(out)
        yield from out

    def _with_csv(self, text, base, cut_short):
        reader = csv.reader(io.StringIO(text, newline=""))
        last = base + text.count("\n") + (1 if cut_short else 0)
        for row in reader:
            if not row:
                continue
            if len(row) != self.width:
                line = base + reader.line_num
                self._bad(line, len(row), cut_short and line == last)
                continue
            self.rows += 1
            yield self.pick(row)
        self.line = base + reader.line_num

    def _bad(self, line, got, cut_short):
        """A row of the wrong width: the end of a cut file is fatal, a stray row is skipped."""
        if cut_short:
            raise CorruptFile(f"line {line} has {got} of {self.width} columns and no line end: "
                              f"the file was cut short")
        self.bad_rows += 1
        if self.first_bad is None:
            self.first_bad = f"line {line} has {got} columns, the header has {self.width}"


def _picker(positions):
    """parts -> tuple of the wanted fields, None for a column the file lacks."""
    if positions and all(p is not None for p in positions):
        get = operator.itemgetter(*positions)
        return get if len(positions) > 1 else (lambda parts: (get(parts),))
    return lambda parts: tuple(None if p is None else parts[p] for p in positions)


def _even_cut(buf):
    """End of the last complete line that leaves every quote closed (0 when there is none)."""
    cut = buf.rfind(b"\n") + 1
    quotes = buf.count(b'"', 0, cut)
    while cut and quotes % 2:
        previous = buf.rfind(b"\n", 0, cut - 1) + 1
        quotes -= buf.count(b'"', previous, cut)
        cut = previous
    return cut
