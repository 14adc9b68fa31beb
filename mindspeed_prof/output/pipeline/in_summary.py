"""``summary``'s per-stage bubble: ``pipeline``'s median answer, folded into a few lines.

Only for a save path whose manifests say the job was pipelined (pp > 1), so a run without
pipeline parallelism reads no trace twice and its summary is as it was.
"""

from typing import Any, Dict, List, Optional

from ...errors import ConfigError
from ..read import jobruns
from ..read.discover import discover


def pipelined(directory: str) -> bool:
    for manifest in jobruns.choose(discover(directory).manifests).chosen.values():
        parallel = manifest.data.get("parallel") if isinstance(manifest.data, dict) else None
        size = parallel.get("pipeline_model_parallel_size") if isinstance(parallel, dict) else None
        if isinstance(size, int) and size > 1:
            return True
    return False


def stage_bubbles(directory: str) -> Optional[Dict[str, Any]]:
    """``{"schedule", "theory", "stages": [...]}`` per replica, or None (not pipelined, no
    marks, or a folder pipeline itself would refuse: ``mindspeed-prof pipeline`` says why)."""
    if not pipelined(directory):
        return None
    from .analyze import analyze
    from .render import report_dict

    try:
        report = report_dict(analyze(directory))
    except ConfigError:
        return None
    return folded(report)


def folded(report: Dict[str, Any]) -> Dict[str, Any]:
    """``pipeline --json``'s answer, as summary shows it."""
    keep = ("stage", "rank", "bubble", "warmup_cooldown_ms", "stall_ms", "theory")
    return {"schedule": report["schedule"], "theory": report["theory"],
            "replicas": [{"replica": r["replica"], "holds_back": r["holds_back"],
                          "stages": [{k: s[k] for k in keep} for s in r["stages"]]}
                         for r in report["replicas"]]}


def bubble_lines(block: Dict[str, Any]) -> List[str]:
    theory = "unknown" if block["theory"] is None else f"{100 * block['theory']:.1f}%"
    lines = [f"pipeline bubble per stage ({block['schedule']}, theory {theory}; "
             f"`mindspeed-prof pipeline` for the detail):"]
    for replica in block["replicas"]:
        cells = ", ".join(f"stage {s['stage']} {100 * s['bubble']:.1f}% (stall "
                          f"{s['stall_ms']:.1f} ms)" for s in replica["stages"])
        held = f"; stage {replica['holds_back']} holds it back" \
            if replica["holds_back"] is not None else ""
        lines.append(f"  {replica['replica']}: {cells}{held}")
    return lines
