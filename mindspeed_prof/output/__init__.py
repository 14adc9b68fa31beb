"""Reading what the profiler wrote: ``check_directory`` (verdicts) and ``summarize_directory``.

    from mindspeed_prof.output import check_directory, summarize_directory
    report = check_directory("profile_dir", expected_ranks=None)   # Report
    report.exit_code, report.rank(0).verdict, report.as_dict()
    summary = summarize_directory("profile_dir", top=10)            # Summary

Submodules: discover (find captures), profinfo/expect (what a capture should hold),
filecheck/csvtable/csvrows/jsonstream/tracescan/sqlitecheck/logscan (read files),
runcheck/checker/report (verdicts), aggregate/torchtrace/summary/requests (numbers; requests:
the per-request rows of an inference profile),
render_check/render_summary/plot (output), parallel (big inputs over several processes),
progress (a bar on a terminal's stderr). The parsers (pyarrow, simdjson, msgspec, numpy) are
imported inside the readers, never by the training side.
"""


def __getattr__(name):
    # Lazy, so that importing one reader does not import them all.
    if name == "check_directory":
        from .checker import check_directory
        return check_directory
    if name == "summarize_directory":
        from .summary import summarize_directory
        return summarize_directory
    if name in ("Report", "RankReport", "RunReport", "VERDICTS"):
        from . import report
        return getattr(report, name)
    raise AttributeError(f"module 'mindspeed_prof.output' has no attribute {name!r}")


__all__ = ["check_directory", "summarize_directory", "Report", "RankReport", "RunReport",
           "VERDICTS"]
