"""``summarize_directory``: step-time breakdown, top kernels and op types, slow ranks.

One run of the save path (``read/jobruns.py``), each capture read on its own
(``capture.py``, over several processes when big), then gathered per (rank, backend): a
later capture's step replaces an earlier one's.
"""

import os
from typing import Optional, Set

from ...errors import ConfigError
from .. import parallel
from ..progress import Progress
from ..read import jobruns
from ..read.discover import discover
from ..read.windows import manifest_window  # one rule, check's too, for the window of a capture
from . import aggregate, engine_steps
from .capture import main_file_size, read_capture
from .model import RankSummary, Summary

__all__ = ["RankSummary", "Summary", "summarize_directory", "closing_notes", "read_capture",
           "waits_of"]


def check_arguments(path: "str | os.PathLike[str]", top: int) -> None:
    """DIR and ``--top`` as a command reading a save path takes them; ConfigError otherwise."""
    if not os.path.isdir(path):
        what = "does not exist" if not os.path.exists(path) else "is not a directory"
        raise ConfigError(f"DIR {path} {what}; give the --profile-save-path of the profiled run "
                          f"(e.g. ./profile_dir), or one *_ascend_pt folder.")
    if top < 1:
        raise ConfigError(f"--top {top} must be >= 1.")


def summarize_directory(path: "str | os.PathLike[str]", top: int = 10,
                        only: Optional[Set[int]] = None,
                        takes_unranked: bool = True,
                        run: Optional[str] = None) -> "Summary":
    """Summarise every rank under ``path``; ``only`` (a set of ranks): just those, for a
    node's share of the job (``job/``), whose notes about the whole folder are left to the
    merge, as are the unranked captures unless ``takes_unranked``. ``run`` (``--run``): that
    run instead of the newest (``read/jobruns.py``; ``ConfigError`` when there is none)."""
    check_arguments(path, top)
    found = discover(path)
    summary = Summary(directory=found.root, top=top)
    chosen = jobruns.choose(found.manifests, run)
    summary.run = chosen.judged.label if chosen.judged else None
    if chosen.left_out:  # two jobs in one save path: one run judged, the others named
        summary.notes.append(chosen.note())
        found.runs = jobruns.keep_runs(found.runs, chosen)
    manifests = chosen.chosen
    # one row per (rank, backend): a torch trace and an NPU capture of one rank time different
    # things (CPU operators, device kernels) and never share a row
    by_key: dict = {}
    for capture in found.runs:
        if capture.rank is None:
            if takes_unranked:
                summary.notes.append(f"{capture.rel}: rank unknown, left out")
            continue
        if only is None or capture.rank in only:
            by_key.setdefault((capture.rank, capture.backend), []).append(capture)
    # oldest first, so the newest capture's row wins when two captures share a step
    runs = [r for key in sorted(by_key)
            for r in sorted(by_key[key], key=lambda r: (r.timestamp or "", r.rel))]
    sizes = [main_file_size(r) for r in runs]
    calls = [(r.backend, r.path, r.rel, r.rank) for r in runs]
    with Progress("summary", sum(sizes)) as bar:
        partials = parallel.run(read_capture, calls,
                                parallel.workers_for(sum(sizes), len(calls)),
                                warm=aggregate.load_parsers, done=lambda i: bar.advance(sizes[i]))
    for capture, partial in zip(runs, partials):
        _leave_out_never_ran(partial, capture, manifests.get(capture.rank))
    for key in sorted(by_key):
        rank_summary = RankSummary(rank=key[0])
        for capture, partial in zip(runs, partials):
            if (capture.rank, capture.backend) == key:
                _absorb(rank_summary, partial)
        rank_summary.steps.sort(key=lambda s: (s["step"] is None, s["step"] or 0,
                                               s.get("device") or 0))
        rank_summary.requests.sort(key=lambda r: (r["request"], r.get("device") or 0))
        rank_summary.engine_windows = engine_steps.engine_windows(
            manifests.get(key[0]), [(r, p) for r, p in zip(runs, partials)
                                    if (r.rank, r.backend) == key])
        summary.ranks.append(rank_summary)
    summary.notes.extend(_two_backends(by_key))
    summary.places = {rank: _place(m) for rank, m in manifests.items()
                      if only is None or rank in only}
    summary.link_reads = _link_reads(found.runs, only)
    if only is None:  # a node's share: the merge finds the job's waits (job/merge.py)
        summary.waits = waits_of(summary)
        summary.communication_matrix = matrix_of(summary)
    if only is None:
        summary.notes.extend(closing_notes(summary, path))
    return summary


def _place(manifest):
    """What the wait analysis needs of a rank's manifest: its parallel layout and host."""
    data = getattr(manifest, "data", None)
    data = data if isinstance(data, dict) else {}
    parallel, host = data.get("parallel"), data.get("hostname")
    return {"parallel": parallel if isinstance(parallel, dict) else None,
            "hostname": host if isinstance(host, str) else None}


def waits_of(summary):
    """The wait analysis (output/waits) of one backend's ranks, named by the layout: torch
    traces where there are (they time what ran), else NPU captures."""
    from ..waits import Layout, analyse

    layout = Layout.from_manifests({r: p.get("parallel") for r, p in summary.places.items()})
    hosts = {r: p.get("hostname") for r, p in summary.places.items()}
    for backend in ("torch", "npu"):
        timed = [r for r in summary.ranks if r.backend == backend and r.collectives]
        if len(timed) > 1:
            result = analyse(timed, layout, hosts)
            if result:
                result["backend"] = backend
                if result["unplaced_calls"]:
                    summary.notes.append(
                        f"waits: {result['unplaced_calls']:,} collective call(s) not placed "
                        f"in a group (the traces name none, and neither the range they ran in "
                        f"nor their ends tell which of the layout's groups): no rank is named "
                        f"for them")
            return result
    return None


def _link_reads(runs, only):
    """Each NPU capture's communication_matrix.json, read (``read/commmatrix.py``): [rank,
    capture, answer], what a node report carries for the merge to find the job's matrix."""
    from ..read import commmatrix

    return [[r.rank, r.rel, commmatrix.read(r.path)] for r in runs
            if r.backend == "npu" and r.rank is not None and (only is None or r.rank in only)]


def matrix_of(summary):
    """The NPU captures' rank-pair matrix and slow links (output/waits/links.py), from the
    captures ``summary.link_reads`` holds."""
    from ..waits import Layout, links

    layout = Layout.from_manifests({r: p.get("parallel") for r, p in summary.places.items()})
    return links.matrix([tuple(item) for item in summary.link_reads], layout)


def _two_backends(by_key):
    """A rank with captures of both backends: say why it has two rows."""
    ranks = {}
    for rank, backend in by_key:
        ranks.setdefault(rank, []).append(backend)
    both = sorted(r for r, backends in ranks.items() if len(backends) > 1)
    if not both:
        return []
    shown = "; ".join(f"rank {r}: " + ", ".join(f"{b} {by_key[(r, b)][0].rel}"
                                                 for b in sorted(ranks[r])) for r in both)
    return [f"captures of both backends for rank(s) {', '.join(map(str, both))} ({shown}): one "
            f"row per backend, never mixed: a torch trace times CPU operators (or CUDA "
            f"kernels), an NPU capture the NPU's kernels. The overall row and slow ranks are "
            f"per backend."]


def closing_notes(summary, path):
    """What a summary with no numbers says about its whole folder (a merge says it once)."""
    if not summary.ranks:
        return [f"nothing to summarise under {summary.directory}: no rank's capture found (run "
                f"`mindspeed-prof check {path}`)"]
    if not summary.summarised:
        why = "; ".join(n for r in summary.ranks for n in r.notes[:1])
        return [f"nothing could be summarised under {summary.directory}: no capture of rank(s) "
                f"{', '.join(str(r.rank) for r in summary.ranks)} could be read "
                f"({why or 'no numbers in them'}); run `mindspeed-prof check {path}` to see why"]
    return []


def _leave_out_never_ran(partial, run, manifest):
    """Drop the step the manifest names ``never_ran``, as ``check`` does: the profiler opened it
    for an iteration that never ran. A torch trace no longer holds it; torch_npu parses the
    capture later, so its step_trace_time.csv still does."""
    never_ran = (manifest_window(run, manifest) or {}).get("never_ran")
    if not isinstance(never_ran, int) or isinstance(never_ran, bool):
        return
    kept = [s for s in partial.steps if s["step"] != never_ran]
    if len(kept) != len(partial.steps):
        partial.steps = kept
        partial.notes.append(f"{run.rel}: step {never_ran} left out of step times: the manifest "
                             f"says iteration {never_ran} never ran (its ProfilerStep was opened "
                             f"as the loop ended)")


def _absorb(target, partial):
    """Add one capture's numbers to its rank's; a later capture's step replaces an earlier."""
    target.backend = target.backend or partial.backend
    target.basis = target.basis or partial.basis
    target.sources.extend(partial.sources)
    target.notes.extend(partial.notes)
    replaced = {(s["step"], s.get("device")) for s in partial.steps}
    target.steps = [s for s in target.steps if (s["step"], s.get("device")) not in replaced]
    target.steps.extend(partial.steps)
    target.requests.extend(partial.requests)
    replaced_steps = {c[0] for c in partial.collectives}
    target.collectives = [c for c in target.collectives if c[0] not in replaced_steps]
    target.collectives.extend(partial.collectives)
    target.spans.update(partial.spans)
    aggregate.merge_into(target.kernels, partial.kernels)
    aggregate.merge_into(target.ops, partial.ops)
    real = "op_statistic.csv"
    if partial.op_types_source == real and target.op_types_source != real:
        target.op_types = {}  # real statistics replace any kernel-derived ones
    if partial.op_types_source and (partial.op_types_source == real
                                    or target.op_types_source != real):
        target.op_types_source = partial.op_types_source
        aggregate.merge_into(target.op_types, partial.op_types)
