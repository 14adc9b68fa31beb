"""``merge_timeline``: the chosen ranks of one window in one aligned Chrome-trace file.

Two passes over nothing twice: the steps every capture recorded come from ``check``'s scan
(remembered in the cache: after a ``check`` this costs a cache lookup per file), the offsets
from them (``clock.py``); then each rank's files are streamed into the output (``write.py``).
"""

import math
import os
from dataclasses import dataclass
from typing import List, Optional

from ...errors import ConfigError
from ...version import __version__
from .. import outfile, parallel
from ..progress import Progress
from ..read.errors import CorruptFile
from . import choose, clock
from .write import COUNTS_SUFFIX, Counts, TimelineWriter, write_rank
from .write import _types as write_types

SUFFIXES = (".json.gz", ".json")


@dataclass
class Merged:
    path: str
    size_bytes: int
    selection: choose.Selection
    alignment: clock.Alignment
    counts: Counts
    min_us: float

    @property
    def ranks(self) -> List[int]:
        return [t.rank for t in self.selection.tracks]

    def metadata(self) -> dict:
        return metadata(self.selection, self.alignment, self.min_us, self.counts,
                        origin_us(self.selection, self.alignment))


def on_collectives(selection: choose.Selection, alignment: clock.Alignment) -> clock.Alignment:
    """The offsets again from collective ends (``clock.align_on_collectives``) where the ranks
    do not share one clock: a torch trace's collectives from ``summary``'s reading of it (the
    cache's when ``summary`` or ``report`` ran, else read now and remembered for them), an NPU
    capture's from communication.json. Ranks on one host need no offset, and nothing is read
    for them. Where collectives cannot be read the step boundaries' offsets stand, and say so."""
    if alignment.aligned_on is None or len(selection.tracks) < 2:
        return alignment
    if len({t.host or ("rank", t.rank) for t in selection.tracks}) < 2:
        return alignment  # one clock: every offset is 0 whatever the collectives say
    found = {}
    for track in selection.tracks:
        mine = _collectives(track)
        if mine is None:
            return alignment
        found[track.rank] = mine
    from ..waits import match

    ends = {key: {rank: v[1] for rank, v in members.items()}
            for key, members in match.keyed(found, {}).items() if len(members) > 1}
    if not ends:
        return alignment
    lengths = [b - a for t in selection.tracks for a, b in t.steps().values()]
    window = 0.5 * sorted(lengths)[len(lengths) // 2] if lengths else float("inf")
    hosts = {t.rank: t.host for t in selection.tracks}
    found_clocks = clock.align_on_collectives(ends, hosts, alignment.offsets_us, window)
    used = max(found_clocks.ends_used.values(), default=0)
    if not used:
        return alignment
    return clock.Alignment(
        found_clocks.offsets_us,
        f"ends of the collectives every member leaves together ({used} per clock at most; "
        f"the step boundaries as the first guess)", alignment.common_steps,
        found_clocks.reference_rank, alignment.clocks,
        {r: found_clocks.uncertainty_us.get(r, alignment.residual_us.get(r, 0.0))
         for r in found_clocks.offsets_us})


def _collectives(track):
    """[step, name, group, bytes, start, end] of a track on its clock; None when not at hand."""
    from ..summary import npu_collectives, torchtrace

    found = []
    for capture in track.captures:
        if capture.backend == "npu":
            folder = os.path.dirname(os.path.dirname(capture.path))
            found += npu_collectives.read(folder)
            continue
        try:  # step boundaries would count a late rank's lateness as its clock's error
            rows = torchtrace.remembered_summary(capture.path).collectives
        except (CorruptFile, OSError, KeyError, TypeError, ValueError):
            return None
        base = capture.base_ns / 1000.0
        found += [[*c[:4], c[4] + base, c[5] + base] for c in rows]
    return found


def check_output(output: Optional[str]) -> str:
    if not output:
        raise ConfigError("-o FILE.json.gz is required: where to write the merged timeline.")
    if not output.endswith(SUFFIXES):
        raise ConfigError(f"-o {output} must end in .json.gz (or .json, uncompressed): the "
                          f"file Perfetto and chrome://tracing open.")
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        raise ConfigError(f"-o {output}: the folder {folder} does not exist; create it or "
                          f"write elsewhere.")
    if os.path.isdir(output):
        raise ConfigError(f"-o {output} is a directory; give a file name ending in .json.gz.")
    return output


def merge_timeline(directory: str, output: str, ranks: Optional[List[str]] = None,
                   steps: Optional[str] = None, role: Optional[str] = None,
                   min_us: float = 0.0) -> Merged:
    """Write the merged timeline of ``directory`` to ``output``; ``ConfigError`` for bad input."""
    check_output(output)
    outfile.refuse_input("-o", output, [directory])
    if not math.isfinite(min_us) or min_us < 0:
        raise ConfigError(f"--min-us {min_us:g} must be a finite number >= 0 (µs; 0 keeps "
                          f"every event).")
    # files check has not scanned give their steps from their markers alone, and the write
    # validates them (it decodes every byte as strictly as check): one that proves corrupt
    # makes the whole choice again, validated, which leaves it out with a note as before
    selection = choose.select(directory, ranks=ranks, steps=steps, role=role, quick=True)
    with outfile.ended_by_signals("timeline", output):  # SIGTERM: temporaries go, exit 143
        try:
            return _aligned_write(output, selection, min_us)
        except CorruptFile:
            if not selection.quick:
                raise
        selection = choose.select(directory, ranks=ranks, steps=steps, role=role)
        return _aligned_write(output, selection, min_us)


def _aligned_write(output, selection, min_us) -> Merged:
    alignment = clock.align({t.rank: t.steps() for t in selection.tracks},
                            {t.rank: t.host for t in selection.tracks}, selection.steps)
    alignment = on_collectives(selection, alignment)
    return _write(output, selection, alignment, origin_us(selection, alignment), min_us)


def _write(output, selection, alignment, origin, min_us) -> Merged:
    try:
        writer = TimelineWriter(output)
    except OSError as exc:
        raise outfile.cannot_write("-o", output, exc) from None
    parts = [outfile.temporary(writer.path, f"rank{t.rank}.part", len(COUNTS_SUFFIX))
             for t in selection.tracks]
    calls = [(part, t.rank, t.name, [(c.path, c.base_ns, _span(c, selection.steps))
                                     for c in t.captures],
              alignment.offsets_us[t.rank], selection.steps, min_us, origin)
             for part, t in zip(parts, selection.tracks)]
    sizes = [sum(_bytes(c.path) for c in t.captures) for t in selection.tracks]
    joined: List[int] = []
    finished = set()

    def done(i):  # parts join the file in rank order, each as soon as those before it have
        finished.add(i)
        while len(joined) < len(parts) and len(joined) in finished:
            writer.add_part(parts[len(joined)])
            joined.append(len(joined))
        bar.advance(sizes[i])

    try:
        with Progress("timeline", sum(sizes)) as bar:
            parallel.run(write_rank, calls, parallel.workers_for(sum(sizes), len(calls)),
                         warm=write_types, done=done)
        size = writer.close(metadata(selection, alignment, min_us, writer.counts, origin))
    except BaseException as exc:
        writer.abandon()
        for part in parts:
            _remove(part)
            _remove(part + COUNTS_SUFFIX)
        ours = {writer.path, writer.tmp, *parts, *(p + COUNTS_SUFFIX for p in parts)}
        if isinstance(exc, OSError) and (exc.filename is None or exc.filename in ours):
            raise outfile.cannot_write("-o", output, exc) from None  # a full disk, a quota
        raise
    return Merged(output, size, selection, alignment, writer.counts, min_us)


def origin_us(selection, alignment) -> int:
    """The whole µs written as 0: the first kept step's start on the reference clock (small
    numbers keep a float's digits for the fraction: ``1704161511420289.011`` µs is not a
    double; 0.011 is)."""
    starts = [start + alignment.offsets_us[t.rank] for t in selection.tracks
              for n, (start, _) in t.steps().items()
              if not selection.steps or selection.steps[0] <= n <= selection.steps[1]]
    return int(min(starts)) if starts else 0


def _bytes(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _span(capture, asked):
    """[start of the first asked step, start of the next step after them): the events of the
    asked steps, with the device's tail of the last one; None: the whole capture."""
    if not asked:
        return None
    steps = capture.steps or {}
    inside = [start for n, (start, _) in steps.items() if asked[0] <= n <= asked[1]]
    after = [start for n, (start, _) in steps.items() if n > asked[1]]
    return min(inside), (min(after) if after else float("inf"))


def metadata(selection, alignment, min_us, counts=None, origin=0) -> dict:
    data = {"tool": "mindspeed_prof", "version": __version__, "root": selection.root,
            "origin_us": origin,
            "time_base": "ts = the reference rank's clock (µs) minus origin_us; each rank's "
                         "own clock plus its offset_us",
            "role": selection.role, "unit": selection.unit, "windows": selection.windows,
            "steps": list(selection.steps) if selection.steps else None,
            "min_us": min_us,
            "ranks": {str(t.rank): {"pid": t.rank + 1, "name": t.name, "host": t.host,
                                    "files": [c.rel for c in t.captures]}
                      for t in selection.tracks},
            **alignment.as_dict(), "notes": selection.notes}
    if alignment.aligned_on is None:
        data["notes"] = data["notes"] + [raw_clocks_note(selection)]
    if counts is not None:
        data.update(events=counts.events, dropped_short=counts.dropped_short,
                    dropped_outside=counts.dropped_outside, unreadable=counts.unreadable)
    return data


def raw_clocks_note(selection) -> str:
    if len(selection.tracks) < 2:
        return "one rank: nothing to align, its own clock"
    return ("no step was recorded by every chosen rank: nothing to align on, so each rank keeps "
            "its raw clock (ranks on different hosts may be shifted against each other)")
