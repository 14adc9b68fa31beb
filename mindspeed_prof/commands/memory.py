"""``mindspeed-prof memory DIR [--html OUT] [--top N] [--json|--csv]``: the allocator snapshots.

Per rank and snapshot (one per profiled window with ``--profile-memory-snapshot``, one per
out-of-memory with ``--profile-memory-oom``): peak allocated and reserved bytes over the
recorded history and the allocation sites holding the most bytes at the peak. ``--html OUT``
writes torch's offline memory timeline (``torch.cuda._memory_viz``), so no pickle has to be
uploaded anywhere: OUT is the file when DIR holds one snapshot (or is one), else a folder with
one page per snapshot. Snapshots are read by a reader that accepts plain values only: a pickle
that names anything else is reported corrupt and nothing in it runs. Exit 0 when every snapshot
was read, 1 when one could not be (or none was found), 2 on a usage error.
"""

import os
import sys

from mindspeed_prof.errors import ConfigError

HELP = ("Summarise the allocator snapshots under DIR (peak allocated/reserved, top allocation "
        "sites at the peak); --html OUT draws torch's memory timeline.")


def add_arguments(parser):
    parser.add_argument("directory", metavar="DIR",
                        help="The --profile-save-path of the run, a window folder, or one "
                             "memory_*.pickle file.")
    parser.add_argument("--html", metavar="OUT", default=None,
                        help="Write torch's memory timeline: OUT.html for one snapshot, else a "
                             "folder OUT/ with one page per snapshot.")
    parser.add_argument("--top", type=int, default=10, metavar="N",
                        help="How many allocation sites to list per snapshot (default 10).")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="Machine-readable JSON.")
    form.add_argument("--csv", action="store_true",
                      help="Long-format CSV rows, as `summary --csv` writes them.")


def _entries(path, top):
    from mindspeed_prof.output.read.memory_files import SnapshotFile
    from mindspeed_prof.output.memory import summary as memory
    from mindspeed_prof.layout import MEMORY_FILE_RE

    if os.path.exists(path) and not os.path.isdir(path):  # a FIFO too: the reader refuses it
        match = MEMORY_FILE_RE.match(os.path.basename(path))
        found = SnapshotFile(path=os.path.abspath(path), rel=os.path.basename(path),
                             rank=int(match.group(2)) if match else -1,
                             kind=match.group(1) if match else "snapshot", folder=".")
        entry = memory.MemoryEntry(file=found)
        try:
            entry.devices = memory.analyse(path, top)
        except (memory.CorruptFile, OSError) as exc:
            entry.error = str(exc)
        return [entry]
    if not os.path.isdir(path):
        raise ConfigError(f"DIR {path} does not exist; give the --profile-save-path of the "
                          f"profiled run, a window folder or one memory_*.pickle file.")
    return memory.summarize_memory(path, top)


def _html(entries, out):
    from mindspeed_prof.output import outfile
    from mindspeed_prof.output.memory.render import write_timeline

    readable = [e for e in entries if e.error is None]
    outfile.refuse_input("--html", out, {e.file.path for e in entries}
                         | {os.path.dirname(e.file.path) for e in entries})
    if len(readable) == 1 and not os.path.isdir(out):
        return [write_timeline(readable[0].file.path, out)]
    if os.path.isfile(out):
        raise ConfigError(f"--html {out} is a file, and DIR holds {len(readable)} snapshots: "
                          f"give a folder for one page per snapshot.")
    written = []
    for entry in readable:
        name = entry.file.rel.replace(os.sep, "__").rsplit(".pickle", 1)[0] + ".html"
        written.append(write_timeline(entry.file.path, os.path.join(out, name)))
    return written


def run(args):
    from mindspeed_prof.output.render import safe

    with safe.usage_errors():
        return _run(args)


def _run(args):
    from mindspeed_prof.output.memory import render as render
    from mindspeed_prof.output.render import safe

    if args.top < 1:
        raise ConfigError(f"--top {args.top} must be >= 1.")
    entries = _entries(args.directory, args.top)
    if args.json:
        from mindspeed_prof.output.render import jsontext

        print(jsontext.dumps({"directory": os.path.abspath(args.directory),
                              "snapshots": render.memory_dicts(entries)}))
    elif args.csv:
        print(render.memory_csv(entries, header=True), end="")
    elif entries:
        print(render.memory_table(entries, top=args.top))
    if not entries:
        print(f"mindspeed-prof memory: no memory_snapshot_rank*.pickle or memory_oom_rank*.pickle "
              f"under {args.directory} (profile with --profile-memory-snapshot or "
              f"--profile-memory-oom)", file=sys.stderr)
        return 1
    if args.html:
        for path in _html(entries, args.html):
            print(safe.lines(f"timeline written to {path}"),
                  file=sys.stderr if args.json or args.csv else sys.stdout)
    bad = [e for e in entries if e.error]
    for entry in bad:
        print(safe.lines(f"mindspeed-prof memory: {entry.file.rel}: {entry.error}"),
              file=sys.stderr)
    return 1 if bad else 0
