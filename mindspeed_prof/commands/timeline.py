"""``mindspeed-prof timeline DIR -o FILE.json.gz [--ranks SEL] [--steps A-B] [--role R]
[--min-us X]``.

One Chrome-trace / Perfetto file of the chosen ranks of one window: a process per rank named
with its place (``rank 5 · tp1 pp0 dp2``), its ``ProfilerStep#N`` markers kept, clocks aligned
on the step boundaries every rank recorded, the offsets in the file (``"mindspeed_prof"``) and
on the terminal. Streamed: memory stays flat whatever the number of ranks. Exit 0 when written,
2 on a usage error (nothing to merge included: the message says what to change).
"""

import sys

from .reading import add_all, add_no_cache, run_reader

HELP = ("Merge the chosen ranks of one window into one Chrome-trace/Perfetto file, clocks "
        "aligned on the steps every rank recorded.")


def add_arguments(parser):
    parser.add_argument("directory", metavar="DIR",
                        help="The --profile-save-path of the run, or one window folder "
                             "(iter_5-7, req_2-3, ...).")
    parser.add_argument("-o", "--output", metavar="FILE.json.gz", required=True,
                        help="Where to write the merged timeline (gzip JSON; .json: "
                             "uncompressed). Open it in https://ui.perfetto.dev or "
                             "chrome://tracing.")
    parser.add_argument("--ranks", nargs="+", metavar="SEL", default=None,
                        help="Only these ranks, as --profile-ranks takes them (0 2 5, 0-7, "
                             "tp=0,pp=*, pp-stage-leaders); default every rank found.")
    parser.add_argument("--steps", metavar="A-B", default=None,
                        help="Only steps A to B (inclusive, the trace's step numbers: "
                             "iterations, requests, engine or RL steps).")
    parser.add_argument("--role", metavar="R", default=None,
                        help="RL output: the role (or ROLE/STAGE) whose ranks to merge.")
    parser.add_argument("--min-us", type=float, default=0.0, metavar="X",
                        help="Leave out complete events shorter than X µs (step markers are "
                             "always kept); default 0, every event.")
    add_no_cache(parser)
    add_all(parser)


def run(args):
    return run_reader(args, _run)


def _run(args):
    from mindspeed_prof.output.timeline.merge import merge_timeline

    merged = merge_timeline(args.directory, args.output, ranks=args.ranks, steps=args.steps,
                            role=args.role, min_us=args.min_us)
    from mindspeed_prof.output.render import safe

    for note in merged.selection.notes:  # problems first: above a thousand ranks' lines
        print(f"note: {safe.cell(note)}", file=sys.stderr, flush=True)
    for line in summary_lines(merged, every=args.all):
        print(safe.cell(line))
    return 0


def summary_lines(merged, every=False):
    selection, alignment, counts = merged.selection, merged.alignment, merged.counts
    steps = sorted({n for t in selection.tracks for n in t.steps()
                    if not selection.steps or selection.steps[0] <= n <= selection.steps[1]})
    shown_steps = f"{steps[0]}-{steps[-1]}" if len(steps) > 1 else \
        (str(steps[0]) if steps else "none recorded")
    dropped = []
    if counts.dropped_short:
        dropped.append(f"{counts.dropped_short:,} shorter than {merged.min_us:g} µs")
    if counts.dropped_outside:
        dropped.append(f"{counts.dropped_outside:,} outside the steps")
    if counts.unreadable:
        dropped.append(f"{counts.unreadable:,} without a usable timestamp or duration")
    lines = [f"timeline: {len(selection.tracks)} rank(s), "
             f"{selection.unit or 'step'}s {shown_steps}, {counts.events:,} events"
             + (f" (left out: {'; '.join(dropped)})" if dropped else "")
             + f" -> {merged.path} ({_size(merged.size_bytes)})"]
    if alignment.aligned_on is None:
        from mindspeed_prof.output.timeline.merge import raw_clocks_note
        lines.append(f"clocks: NOT aligned: {raw_clocks_note(selection)}")
    else:
        lines.append(f"clocks aligned on the {alignment.aligned_on}, one clock "
                     f"{alignment.clocks}; reference rank {alignment.reference_rank}; "
                     f"they agree within {alignment.tolerance_us:,.1f} µs after the "
                     f"offsets (offsets are clock error; lateness between ranks is skew and "
                     f"stays)")
    from mindspeed_prof.output.render import many

    tracks = selection.tracks
    if many.condensed(len(tracks), every):  # the offsets' spread, then the largest ones
        offsets = [alignment.offsets_us.get(t.rank, 0.0) for t in tracks]
        residuals = [r for r in (alignment.residual_us.get(t.rank) for t in tracks)
                     if r is not None]
        lines.append(f"  {len(tracks)} ranks ({many.rank_ranges(t.rank for t in tracks)}): "
                     f"offsets {min(offsets):+,.1f} to {max(offsets):+,.1f} µs"
                     + (f", residual up to {max(residuals):,.1f} µs" if residuals else "")
                     + f"; the 5 largest below, every one in the file ({many.ALL_HINT})")
        tracks = sorted(tracks, key=lambda t: -abs(alignment.offsets_us.get(t.rank, 0.0)))[:5]
    for track in tracks:
        offset = alignment.offsets_us.get(track.rank, 0.0)
        residual = alignment.residual_us.get(track.rank)
        lines.append(f"  {track.name:<32} offset {offset:+,.1f} µs"
                     + (f"  (residual {residual:,.1f} µs)" if residual is not None else "")
                     + (f"  host {track.host}" if track.host else ""))
    return lines


def _size(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} B"
