"""The report's "What would each fix save" section: ``whatif`` on the run's schedule marks.

Only for a pipelined run (a manifest names more than one PP stage): elsewhere there is no
schedule to replay and the traces are not read again. A run recorded without the marks gets a
one-line note saying how to record them.
"""

from typing import Any, Dict, List, Optional

from ...errors import ConfigError
from .cells import MAX_LISTED, e, num_cell, table
from .sections import Sections

SHOWN = 5  # groups per dimension


def whatif_data(path: str, manifests: Dict[int, Any]) -> Optional[Dict[str, Any]]:
    """``whatif --json`` of ``path``, ``{"absent": why}`` when it cannot run, None when the run
    is not pipelined."""
    from ..timeline.choose import _sizes
    from ..whatif import analysis, render
    from ..whatif.capture import from_capture

    sizes = [_sizes(m.data) for m in manifests.values() if isinstance(m.data, dict)]
    if not any(s and s["pp"] > 1 for s in sizes):
        return None
    try:
        table_, meta, notes = from_capture(path)
        result = analysis.analyse(table_, meta, path)
    except ConfigError as exc:
        return {"absent": str(exc)}
    result.notes[:0] = notes
    return render.as_dict(result, path)


def section(body: Sections, data: Optional[Dict[str, Any]], prefix: str = "") -> None:
    if data is None:
        return
    body.section(prefix + "What would each fix save",
                 "If one stage, DP rank or op type ran like the others, how long would a step "
                 "take? The schedule replayed with that group at its typical durations "
                 "(ByteDance's what-if analysis; `mindspeed-prof whatif DIR`).")
    if "absent" in data:
        body.note(f"no what-if analysis: {data['absent']}")
        return
    for line in data["verdict"]:
        body.raw(f"<p>{e(line, 600)}</p>")
    rows: List[str] = []
    for dim, title in (("by_stage", "stage"), ("by_dp_rank", "DP rank"),
                       ("by_optype", "op type")):
        for entry in sorted(data[dim], key=lambda x: -(x["saving"] or 0.0))[:SHOWN]:
            saving = entry["saving"]
            rows.append(f"<tr><td>{e(title)}</td><td>{e(entry['name'], 80)}</td>"
                        f"{num_cell(entry['slowdown'], '.3f')}"
                        f"{num_cell(entry['fixed_step_ms'], '.1f')}"
                        f"{num_cell(None if saving is None else saving * 100, '.1f')}</tr>")
    body.raw(table(["FIX", "WHICH", "S KEPT AS RECORDED", "STEP IF FIXED (ms)", "SAVES (%)"],
                   rows, "whatif"))
    step = data["step_ms"]
    body.note(f"S = {data['slowdown']}; a step {step['simulated']} ms replayed as recorded, "
              f"{step['ideal']} ms with every op typical; M_W = {data['m_w']['value']}, M_S = "
              f"{data['m_s']['value']}.")
    for note in data["notes"][:MAX_LISTED]:
        body.note(note)
