"""Reading what the profiler wrote: ``check_directory`` (verdicts) and ``summarize_directory``.

    from mindspeed_prof.output import check_directory, summarize_directory
    report = check_directory("profile_dir", expected_ranks=None)   # Report
    report.exit_code, report.rank(0).verdict, report.as_dict()
    summary = summarize_directory("profile_dir", top=10)            # Summary

Grouped by role, each folder importing only the ones below it:
  render/   what the commands print: tables, JSON, CSV (check, summary, summary_table) and plot
  check/    verdict rules: expect, file, capture, directory (check_directory); report
  summary/  the numbers: directory (summarize_directory), capture (one capture), model,
            aggregate, npu_db (db exports), torchtrace + torchsteps (torch traces), compare,
            requests
  read/     file scanners: discover, jobruns, windows, roles, profinfo, jsonstream, tracescan,
            csvrows, csvtable, columns, sqlitecheck, dbsummary, kernels, logscan; errors
  job/      past one machine: share, node_report, merge
Each analysis view is a folder of its own, reading through read/ (check, summary, render in it
where the view has them):
  memory/   the memory snapshots: check, summary (peaks and what held them), render
  roles/    RL roles: check (verdicts by (role, rank)), summary (per RL step), render
  timeline/ one Chrome-trace/Perfetto file of many ranks: choose, clock (offsets), write, merge
  compare/  two profiles side by side: diff_paths (``mindspeed-prof diff``)
  parallel (big inputs over several processes), progress (a bar on a terminal's stderr),
  cache (what a big file held, remembered), deps (the parsers, imported through one place).
The parsers (pyarrow, simdjson, msgspec, numpy) are imported inside the readers, never by the
training side.
"""


def __getattr__(name):
    # Lazy, so that importing one reader does not import them all.
    if name == "check_directory":
        from .check.directory import check_directory
        return check_directory
    if name == "summarize_directory":
        from .summary.directory import summarize_directory
        return summarize_directory
    if name in ("Report", "RankReport", "RunReport", "VERDICTS"):
        from .check import report
        return getattr(report, name)
    raise AttributeError(f"module 'mindspeed_prof.output' has no attribute {name!r}")


__all__ = ["check_directory", "summarize_directory", "Report", "RankReport", "RunReport",
           "VERDICTS"]
