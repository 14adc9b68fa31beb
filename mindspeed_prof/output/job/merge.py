"""The job's verdict and summary from the nodes' reports (``node_report``).

Ranks come from the node that covered them (a rank two nodes claim keeps the first report and
says so); a rank the manifests expect that no node covered is missing, as one machine would
call it. Notes and warnings about the whole folder, which every node of a shared save path
repeats, are said once. Slow ranks, top kernels and the overall breakdown are computed from
the merged ranks, so they are against the whole job's median and totals.
"""

import json
from dataclasses import dataclass

from ...errors import ConfigError
from ..check.file import FileCheck
from ..check.report import MISSING, RankReport, Report
from ..summary.directory import Summary, closing_notes
from .node_report import FORMAT, VERSION, rank_summary_from


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
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except OSError as exc:
            raise ConfigError(f"REPORT {path}: cannot be read ({exc.strerror or exc}); give "
                              f"the files `check --report` wrote.") from None
        except ValueError as exc:
            raise ConfigError(f"REPORT {path}: not JSON ({exc}); was it cut short? Run that "
                              f"node's `check --report` again.") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ConfigError(f"REPORT {path}: not a node report (written by `mindspeed-prof "
                              f"check DIR --node I/N --report FILE`).")
        if data.get("version") != VERSION:
            raise ConfigError(f"REPORT {path}: node report version {data.get('version')!r}, "
                              f"this mindspeed-prof reads {VERSION}; use the same version on "
                              f"every node and for the merge.")
        reports.append((path, data))
    if not reports:
        raise ConfigError("merge: give at least one REPORT.")
    return sorted(reports, key=lambda pr: ((pr[1]["node"] or {}).get("index", 0), pr[0]))


def merge_reports(paths):
    reports = read_reports(paths)
    directories = list(dict.fromkeys(data["directory"] for _, data in reports))
    directory = directories[0] if len(directories) == 1 else ", ".join(directories)
    check = Report(directory=directory)
    summary = Summary(directory=directory,
                      top=max(data["summary"]["top"] for _, data in reports))
    expected, by_rank, summaries, warnings, notes = set(), {}, {}, {}, {}
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
    judged = [r for r in dict.fromkeys(data["check"].get("run") for _, data in reports)
              if r is not None]
    if len(judged) > 1:  # nodes of a shared save path all pick its newest run: node-local disks
        warnings.setdefault(f"the node reports judged different runs ({', '.join(judged)}): "
                            f"their save paths hold different jobs", None)
    check.run = summary.run = ", ".join(judged) if judged else None
    check.expected_ranks = sorted(expected)
    for rank in sorted(set(by_rank) | expected):
        if rank in by_rank:
            check.ranks.append(by_rank[rank][1])
        else:
            check.ranks.append(RankReport(rank=rank, verdict=MISSING, problems=[
                "no output for this rank (expected by the manifests; no node report "
                "covers it)"]))
    check.warnings = list(warnings)
    summary.ranks = [summaries[key] for key in sorted(summaries)]
    summary.notes = list(notes) + closing_notes(summary, directory)
    return Merged(check, summary, len(reports))
