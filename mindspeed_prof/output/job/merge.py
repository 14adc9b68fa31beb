"""The job's verdict and summary from the nodes' reports (``node_report``).

Ranks come from the node that covered them (a rank two nodes claim keeps the first report and
says so); a rank the manifests expect that no node covered is missing, as one machine would
call it. Notes and warnings about the whole folder, which every node of a shared save path
repeats, are said once. Slow ranks, top kernels and the overall breakdown are computed from
the merged ranks, so they are against the whole job's median and totals.

Reports of different runs are not one job (a node-local folder still holding an older job's
output is the usual way): as ``check`` does with one folder, the newest run is judged, the
reports of the others are left out and named, and the ranks they covered are missing. Two runs
are different when both name a run id their ranks share (``job_run`` in the report) and the
ids differ; a node whose run shares no id (manifests of an older mindspeed_prof, ranks that
had no job store) cannot say which job it belongs to and is taken with the judged one.
"""

import json
from dataclasses import dataclass

from ...errors import ConfigError
from ..check.file import FileCheck
from ..check.report import MISSING, RankReport, Report
from ..summary.directory import Summary, closing_notes, matrix_of, waits_of
from ..read.errors import CorruptFile
from ..read.regular import read_regular
from .node_report import FORMAT, VERSION, rank_summary_from
from .report_shape import shape_problem

MAX_REPORT_BYTES = 1 << 30


@dataclass
class Merged:
    check: Report
    summary: Summary
    nodes: int

    def as_dict(self):
        from ..render.summary import summary_dict

        return {"nodes": self.nodes, "check": self.check.as_dict(),
                "summary": summary_dict(self.summary)}


def read_reports(paths):
    reports = []
    for path in paths:
        try:
            data = json.loads(read_regular(path, MAX_REPORT_BYTES))  # never a FIFO's read
        except CorruptFile as exc:
            raise ConfigError(f"REPORT {path}: {exc}; give the files `check --report` "
                              f"wrote.") from None
        except OSError as exc:
            raise ConfigError(f"REPORT {path}: cannot be read ({exc.strerror or exc}); give "
                              f"the files `check --report` wrote.") from None
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise ConfigError(f"REPORT {path}: not JSON ({exc}); was it cut short? Run that "
                              f"node's `check --report` again.") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ConfigError(f"REPORT {path}: not a node report (written by `mindspeed-prof "
                              f"check DIR --node I/N --report FILE`).")
        if data.get("version") != VERSION:
            raise ConfigError(f"REPORT {path}: node report version {data.get('version')!r}, "
                              f"this mindspeed-prof reads {VERSION}; use the same version on "
                              f"every node and for the merge.")
        problem = shape_problem(data)
        if problem:
            raise ConfigError(f"REPORT {path}: not a node report as `check --report` writes it "
                              f"({problem}); write it again with `mindspeed-prof check DIR "
                              f"--node I/N --report FILE`.")
        reports.append((path, data))
    if not reports:
        raise ConfigError("merge: give at least one REPORT.")
    return sorted(reports, key=lambda pr: ((pr[1]["node"] or {}).get("index", 0), pr[0]))


def merge_reports(paths):
    every = read_reports(paths)
    reports, left_out, runs_note = _one_run(every)
    directories = list(dict.fromkeys(data["directory"] for _, data in reports))
    directory = directories[0] if len(directories) == 1 else ", ".join(directories)
    check = Report(directory=directory)
    summary = Summary(directory=directory,
                      top=max(data["summary"]["top"] for _, data in reports))
    expected, by_rank, summaries, warnings, notes = set(), {}, {}, {}, {}
    if runs_note:
        warnings[runs_note] = None
    for path, data in reports:
        node = Report.from_dict(data["check"], FileCheck.from_dict)
        expected.update(node.expected_ranks)
        for rank_report in node.ranks:
            if rank_report.rank in by_rank:
                warnings.setdefault(f"rank {rank_report.rank} is in two node reports; kept "
                                    f"{by_rank[rank_report.rank][0]}, left out {path}", None)
                continue
            by_rank[rank_report.rank] = (path, rank_report)
        check.unranked.extend(node.unranked)
        for warning in node.warnings:
            warnings.setdefault(warning, None)
        for item in data["summary"]["ranks"]:
            # a row per (rank, backend), as on one machine
            summaries.setdefault((item["rank"], item["backend"] or ""), rank_summary_from(item))
        for note in data["summary"]["notes"]:
            notes.setdefault(note, None)
        for rank, place in (data["summary"].get("places") or {}).items():
            summary.places.setdefault(int(rank), place)
        summary.link_reads.extend(data["summary"].get("links") or [])
    judged = [r for r in dict.fromkeys(data["check"].get("run") for _, data in reports)
              if r is not None]
    if len(judged) > 1 and not left_out:
        # runs that name no shared id (older manifests): which job each is cannot be told
        warnings.setdefault(f"the node reports judged different runs ({', '.join(judged)}): "
                            f"their save paths may hold different jobs", None)
    check.run = summary.run = ", ".join(judged) if judged else None
    stale: dict = {}  # rank -> the left-out report that covered it
    for path, data in left_out:
        for rank in _covered(data):
            stale.setdefault(rank, (path, data))
    check.expected_ranks = sorted(expected | set(stale))
    for rank in sorted(set(by_rank) | expected | set(stale)):
        if rank in by_rank:
            check.ranks.append(by_rank[rank][1])
        elif rank in stale:
            path, data = stale[rank]
            check.ranks.append(RankReport(rank=rank, verdict=MISSING, problems=[
                f"no output of run {check.run} for this rank: its node report {path} holds "
                f"run {_label(data)}, another job's (left out)"]))
        else:
            check.ranks.append(RankReport(rank=rank, verdict=MISSING, problems=[
                "no output for this rank (expected by the manifests; no node report "
                "covers it)"]))
    check.warnings = list(warnings)
    summary.ranks = [summaries[key] for key in sorted(summaries)]
    summary.notes = list(notes) + closing_notes(summary, directory)
    summary.waits = waits_of(summary)  # the job's waits, as one machine finds them
    summary.link_reads.sort(key=lambda item: (item[0], item[1]))  # one machine's order
    summary.communication_matrix = matrix_of(summary)
    return Merged(check, summary, len(every))


def _one_run(reports):
    """(the reports of the run judged, the reports left out, the note naming them or None).

    Reports are grouped by the shared run id they judged; the newest group (by when its first
    rank armed) is judged, as ``check`` judges the newest run of one folder. Reports whose run
    shares no id go with the judged group: nothing in them says which job they belong to."""
    groups: dict = {}
    for report in reports:
        run = report[1].get("job_run")
        if isinstance(run, dict) and run.get("shared") is True \
                and isinstance(run.get("label"), str):
            groups.setdefault(run["label"], []).append(report)
    if len(groups) <= 1:
        return reports, [], None
    ordered = sorted(groups, key=lambda label: (_started(groups[label]), label))
    out = {id(pr) for label in ordered[:-1] for pr in groups[label]}
    kept = [pr for pr in reports if id(pr) not in out]
    left_out = [pr for pr in reports if id(pr) in out]
    described = [_describe(label, groups[label]) for label in ordered]
    note = (f"{len(groups)} runs in these node reports (different jobs): judged the newest "
            f"run, {described[-1]}; left out " + "; ".join(described[:-1])
            + ": their ranks are missing from this run. A node-local save path still holding "
              "an older job's output? Check that node's folder with --run ID, or give each "
              "job its own --profile-save-path")
    return kept, left_out, note


def _started(group):
    starts = [data["job_run"].get("started_ns") for _, data in group]
    starts = [s for s in starts if isinstance(s, int) and not isinstance(s, bool)]
    return min(starts) if starts else 0


def _describe(label, group):
    from ..render import many

    ranks = sorted({r for _, data in group for r in _covered(data)})
    told = many.rank_ranges(ranks) if len(ranks) > many.ROWS_SHOWN else ", ".join(map(str, ranks))
    return (f"run {label} (report(s) {', '.join(path for path, _ in group)}: rank(s) "
            f"{told or 'none'})")


def _covered(data):
    covered = data.get("covered_ranks")
    if not isinstance(covered, list):
        covered = [r.get("rank") for r in data["check"].get("ranks", []) if isinstance(r, dict)]
    return [r for r in covered if isinstance(r, int) and not isinstance(r, bool)]


def _label(data):
    return data["job_run"]["label"]
