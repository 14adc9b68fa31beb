"""``mindspeed-prof analyse DIR``: parse raw NPU captures offline, then ``check`` them.

Parsing is torch_npu's own ``torch_npu.profiler.profiler.analyse`` (needs torch_npu and CANN's
``msprof``), run on each capture that has raw data but no parsed output; ``--all`` re-parses
every capture (torch_npu recreates ASCEND_PROFILER_OUTPUT, so this is repeatable). Exit 2 when
torch_npu cannot be imported: the environment, not the data, needs fixing. Otherwise the exit
code is ``check``'s.
"""

import contextlib
import inspect
import os
import shutil
import sys

from mindspeed_prof.errors import ConfigError

HELP = "Parse raw NPU profiler data offline with torch_npu's analyse, then run check."


def add_arguments(parser):
    parser.add_argument("directory", metavar="DIR",
                        help="The --profile-save-path of the run, or one *_ascend_pt folder.")
    parser.add_argument("--all", action="store_true",
                        help="Re-parse every capture, not only the unparsed ones.")
    parser.add_argument("--export-type", choices=("text", "db"), nargs="+", default=None,
                        help="Override the export type recorded in profiler_info.json.")
    parser.add_argument("--ranks", nargs="+", metavar="R", default=None,
                        help="Ranks the following check must find (as `check --ranks`).")
    parser.add_argument("--json", action="store_true", help="check's report as JSON.")


def load_analyse():
    """torch_npu's offline parser, or ConfigError saying how to make it importable."""
    try:
        from torch_npu.profiler.profiler import analyse
    except Exception as exc:  # noqa: BLE001 - a broken CANN raises ImportError, OSError...
        raise ConfigError(
            f"analyse needs torch_npu, which cannot be imported here ({type(exc).__name__}: "
            f"{exc}). This is the environment, not the data: install the torch_npu wheel "
            f"matching your torch, and source CANN's set_env.sh (e.g. `source "
            f"/usr/local/Ascend/ascend-toolkit/set_env.sh`) so that torch_npu and `msprof` "
            f"load; or run analyse on the NPU machine that recorded the data.") from None
    return analyse


def pending(directory, everything):
    """Captures to parse: (to_parse, skipped notes)."""
    from mindspeed_prof.output.read import discover as discovery
    from mindspeed_prof.output.check.capture import RAW_DIRS, RAW_PREFIX

    to_parse, notes = [], []
    for run in discovery.discover(directory).runs:
        if run.backend != "npu":
            continue
        try:
            entries = os.listdir(run.path)
        except OSError as exc:
            notes.append(f"{run.rel}: cannot list ({exc.strerror})")
            continue
        if not any(e in RAW_DIRS or e.startswith(RAW_PREFIX) for e in entries):
            notes.append(f"{run.rel}: no raw data (FRAMEWORK/, PROF_*), nothing to parse")
            continue
        if run.info is None:
            notes.append(f"{run.rel}: no readable profiler_info*.json (the capture never "
                         f"stopped), torch_npu cannot parse it")
            continue
        output = os.path.join(run.path, "ASCEND_PROFILER_OUTPUT")
        parsed = os.path.isdir(output) and os.listdir(output)
        if parsed and not everything:
            continue
        to_parse.append(run)
    return to_parse, notes


def run(args):
    from mindspeed_prof.commands.check import expected_ranks
    from mindspeed_prof.output.check.directory import check_directory
    from mindspeed_prof.output.progress import Progress
    from mindspeed_prof.output.render.check import check_json, check_table

    if not os.path.isdir(args.directory):
        raise ConfigError(f"DIR {args.directory} is not a directory; give the "
                          f"--profile-save-path of the profiled run (e.g. ./profile_dir).")
    wanted = expected_ranks(args.ranks)
    to_parse, notes = pending(args.directory, args.all)
    for note in notes:
        _say("skipped: " + note)
    # torch_npu is needed only for NPU data to parse: a folder of torch.profiler traces has
    # none, and saying it needs torch_npu there would send the user to install the wrong thing.
    analyse = load_analyse() if to_parse else None
    if analyse is not None and shutil.which("msprof") is None:
        _say("warning: `msprof` is not on PATH: torch_npu parses NPU data with CANN's msprof; "
             "source CANN's set_env.sh first, or only framework data will be parsed.")
    if not to_parse:
        _say(_nothing_to_parse(args.directory, notes))
    kwargs = {}
    if args.export_type and "export_type" in inspect.signature(analyse).parameters:
        kwargs["export_type"] = list(args.export_type)
    elif args.export_type:
        _say("warning: this torch_npu's analyse() has no export_type; --export-type ignored.")
    with Progress("analyse", len(to_parse), unit="captures") as bar:
        for capture in to_parse:
            bar.close()  # torch_npu's own lines and ours start on a clean line
            _say(f"parsing {capture.rel} ...")
            try:
                with _stdout_to_stderr():
                    analyse(capture.path, **kwargs)
            except Exception as exc:  # noqa: BLE001 - one capture's failure must not stop the rest
                _say(f"error: torch_npu analyse failed on {capture.rel}: "
                     f"{type(exc).__name__}: {exc}")
            bar.advance(1)
    from mindspeed_prof.output.deps import as_usage_error

    with as_usage_error():
        report = check_directory(args.directory, wanted)
    print(check_json(report) if args.json else check_table(report))
    return report.exit_code


def _nothing_to_parse(directory, notes):
    from mindspeed_prof.output.read import discover as discovery

    runs = discovery.discover(directory).runs
    if not any(run.backend == "npu" for run in runs):
        held = (f"its {len(runs)} capture(s) are {', '.join(sorted({str(r.backend) for r in runs}))} "
                f"backend output, readable as they are" if runs else "no capture was found")
        return (f"nothing to parse: no raw NPU data here ({held}); analyse parses torch_npu's "
                f"raw data only. check and summary read this folder directly.")
    if notes:
        return "nothing to parse: no NPU capture here has raw data left to parse (see above)."
    return "nothing to parse: every capture is parsed already (use --all to re-parse)."


@contextlib.contextmanager
def _stdout_to_stderr():
    """torch_npu prints its progress on stdout; stdout is for check's report (--json)."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)  # native code writes to the descriptor, not to sys.stdout
    except OSError:
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _say(text):
    print(f"mindspeed-prof analyse: {text}", file=sys.stderr, flush=True)
