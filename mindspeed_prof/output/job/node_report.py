"""One node's mergeable report: its share's verdicts and summary numbers, as JSON.

Everything the job's verdict and summary need and nothing computed across ranks: each rank's
full report (``check --json``'s) and its summary numbers whole (every kernel, op type and
operator, not the top N: the job's top N comes from the merged totals), so ``merge`` computes
the job's numbers, slow ranks included, from the same values one machine would; and the run
the node judged (``job_run``), so that ``merge`` never takes two jobs' nodes for one.
"""

import os

from ..check.directory import check_directory
from .. import outfile
from ..read import discover, jobruns
from ..render import jsontext
from ..summary.aggregate import Item
from ..summary.directory import RankSummary, summarize_directory
from .share import Local

FORMAT = "mindspeed_prof node report"
VERSION = 1
ITEM_FIELDS = ("kernels", "op_types", "ops")


def node_report(path, share=None, expected_ranks=None, top=10, run=None):
    """(check Report, summary Summary, the JSON-able node report) of ``path``'s share (a
    ``Share``; None: the ranks found under ``path``, as on a node-local disk)."""
    share = share if share is not None else Local()
    report = check_directory(path, expected_ranks, share, run=run)
    covered = report.covered
    # the check has just read the big files: the summary takes their numbers from the cache
    summary = summarize_directory(path, top, only=set(covered),
                                  takes_unranked=share.takes_unranked, run=run)
    data = {"format": FORMAT, "version": VERSION, "directory": report.directory,
            "node": share.as_dict(), "covered_ranks": covered,
            "job_run": judged_run(path, run),
            "check": report.as_dict(),
            "summary": {"directory": summary.directory, "top": summary.top,
                        "notes": summary.notes,
                        "places": {str(r): p for r, p in summary.places.items()},
                        "links": summary.link_reads,
                        "ranks": [rank_summary_dict(r) for r in summary.ranks]}}
    return report, summary, data


def judged_run(path, run=None):
    """The run ``check`` judged under ``path`` as ``merge`` needs it to tell the nodes' runs
    apart: {label, shared (its ranks share a run id: the label names one job), started_ns
    (when its first rank armed)}; None without readable manifests."""
    judged = jobruns.choose(discover.discover(path).manifests, run).judged
    if judged is None:
        return None
    return {"label": judged.label, "shared": judged.shared, "started_ns": judged.started}


def write_report(data, target):
    """Write the report to ``target`` (``{node}``: the node's index); returns the path."""
    node = data["node"]["index"] if data["node"] else 0
    target = target.replace("{node}", str(node))
    folder = os.path.dirname(os.path.abspath(target))
    tmp = outfile.temporary(target, "tmp")
    try:
        os.makedirs(folder, exist_ok=True)
        with outfile.ended_by_signals():
            try:
                with open(tmp, "w", encoding="utf-8") as handle:
                    handle.write(jsontext.compact(data, separators=(",", ":")))  # strict JSON
                os.replace(tmp, target)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
    except OSError as exc:
        raise outfile.cannot_write("--report", target, exc) from None
    return target


def rank_summary_dict(rank_summary):
    data = {k: getattr(rank_summary, k) for k in ("rank", "backend", "sources", "steps",
                                                  "op_types_source", "requests", "notes",
                                                  "basis", "collectives")}
    data["spans"] = [[n, a, b] for n, (a, b) in sorted(rank_summary.spans.items())]
    for name in ITEM_FIELDS:  # in insertion order: ties sort as on one machine
        data[name] = [[list(key) if isinstance(key, tuple) else key, item.name, item.kind,
                       item.total_us, item.count]
                      for key, item in getattr(rank_summary, name).items()]
    return data


def rank_summary_from(data):
    rank_summary = RankSummary(rank=data["rank"])
    for name in ("backend", "sources", "steps", "op_types_source", "requests", "notes"):
        setattr(rank_summary, name, data[name])
    rank_summary.basis = data.get("basis")  # reports of 0.x before it have none
    # the collectives and step spans the wait analysis matches (none in older reports)
    rank_summary.collectives = [list(c) for c in data.get("collectives") or []]
    rank_summary.spans = {n: (a, b) for n, a, b in data.get("spans") or []}
    for name in ITEM_FIELDS:
        setattr(rank_summary, name, {
            tuple(key) if isinstance(key, list) else key: Item(item_name, kind, total, count)
            for key, item_name, kind, total, count in data[name]})
    return rank_summary
