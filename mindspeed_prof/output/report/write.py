"""Write the report: build its data, render the page, write it atomically, say its size.

The size is bounded: plotly.js (embedded once, about 4.6 MiB) plus at most ``DATA_BOUND``
bytes of page. What the page holds is bounded by construction (heatmaps of at most
``heatmap.MAX_ROWS`` x ``heatmap.MAX_COLUMNS`` cells, tables of at most ``cells.MAX_ROWS``
rows, text cells cut at ``cells.MAX_TEXT``), so a 1,024-rank job's report is no bigger than
a 64-rank one's heatmaps plus its per-rank table.
"""

import os
from dataclasses import dataclass
from typing import Optional

from ...errors import ConfigError
from .. import outfile
from . import build, page

DATA_BOUND = 3 << 20  # bytes of page beside plotly.js


@dataclass
class Written:
    path: str
    size: int
    plotlyjs: int
    summarised: bool  # a rank had numbers (summary's exit 0)

    @property
    def bound(self) -> int:
        return self.plotlyjs + DATA_BOUND


def plotlyjs() -> str:
    """plotly.js, from the plotly package (offline: nothing is fetched when the page opens)."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise ConfigError("report needs plotly (it embeds plotly.js in the page), which is not "
                          "installed; run `pip install 'mindspeed_prof[report]'` (or `pip "
                          "install plotly`).") from None
    return get_plotlyjs()


def write_report(directory: str, out: str, top: int = 10, run: Optional[str] = None,
                 baseline: Optional[str] = None) -> Written:
    if not out.lower().endswith((".html", ".htm")):
        raise ConfigError(f"-o {out}: give an .html file name, e.g. -o report.html")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise ConfigError(f"-o {out}: the folder {folder} does not exist; create it or pick "
                          f"another path.")
    outfile.refuse_input("-o", out, [directory, baseline])
    script = plotlyjs()  # before any reading: a missing plotly is said at once
    if baseline is not None and not os.path.isdir(baseline):
        raise ConfigError(f"--baseline {baseline}: not a directory; give the save path of the "
                          f"run to compare against.")
    data = build.build(directory, top=top, run=run)
    diff = None
    if baseline is not None:
        from .baseline import diff_against

        diff = diff_against(baseline, directory, top=top)
    text = page.render(data, script, diff)
    tmp = outfile.temporary(out, "tmp")
    try:
        with outfile.ended_by_signals("report", out):
            try:
                with open(tmp, "w", encoding="utf-8") as handle:
                    handle.write(text)
                os.replace(tmp, out)
            except BaseException:
                _remove(tmp)
                raise
    except OSError as exc:
        raise outfile.cannot_write("-o", out, exc) from None
    summarised = any(r["steps"] or r["top_kernels"] or r["op_types"] or r["top_ops"]
                     or r["requests"] for part in data["parts"]
                     for r in part["summary"]["ranks"])
    return Written(out, os.path.getsize(out), len(script.encode("utf-8")), summarised)


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass
