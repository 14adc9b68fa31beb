"""Read a ``mindspeed-prof report`` page back: its sections, tables and figures, as a reader
(or the browser) sees them, for tests that compare them with ``summary --json``."""

import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Dict, List, Optional

NEW_PLOT = re.compile(r'Plotly\.newPlot\("(fig\d+)",')


@dataclass
class Cell:
    text: str
    us: Optional[float] = None  # data-us: the exact µs of summary --json


@dataclass
class Table:
    cls: str
    header: List[str]
    rows: List[List[Cell]] = field(default_factory=list)

    def column(self, name):
        index = self.header.index(name)
        return [row[index] for row in self.rows]

    def by(self, key, text):
        """The rows whose column ``key`` reads ``text``."""
        index = self.header.index(key)
        return [row for row in self.rows if row[index].text == text]


class _Parser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sections: List[str] = []
        self.tables: List[Table] = []
        self._in = None
        self._cell: Optional[Cell] = None
        self._row: Optional[List[Cell]] = None
        self._header = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "h2":
            self._in = "h2"
            self.sections.append("")
        elif tag == "table":
            self.tables.append(Table(attrs.get("class") or "", []))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            us = attrs.get("data-us")
            self._cell = Cell("", float(us) if us is not None else None)
            self._header = tag == "th"

    def handle_endtag(self, tag):
        if tag == "h2":
            self._in = None
        elif tag in ("td", "th") and self._cell is not None:
            self._cell.text = self._cell.text.strip()
            if self._header:
                self.tables[-1].header.append(self._cell.text)
            else:
                self._row.append(self._cell)
            self._cell = None
        elif tag == "tr" and self._row:
            self.tables[-1].rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._in == "h2":
            self.sections[-1] += data
        if self._cell is not None:
            self._cell.text += data


@dataclass
class Page:
    text: str
    sections: List[str]
    tables: List[Table]
    figures: Dict[str, dict]  # div id -> {"data": [...], "layout": {...}}

    def table(self, cls, index=0):
        return [t for t in self.tables if t.cls == cls][index]

    def heatmaps(self):
        return [f for f in self.figures.values() if f["data"][0]["type"] == "heatmap"]


def figures_of(text):
    decoder = json.JSONDecoder()
    found = {}
    for match in NEW_PLOT.finditer(text):
        data, end = decoder.raw_decode(text, match.end())
        layout, _ = decoder.raw_decode(text, end + 1)
        found[match.group(1)] = {"data": data, "layout": layout}
    return found


def read_page(path):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    parser = _Parser()
    parser.feed(text)
    return Page(text, parser.sections, parser.tables, figures_of(text))
