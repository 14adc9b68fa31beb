"""The ``--profile-ranks`` grammar: which global ranks profile.

A selection is a tuple of items; the empty tuple means every rank. Items are global ranks (int)
or topology selectors (str) that need the parallel layout to resolve:

    -1 | all                  every rank (only these: an empty list is a mistake, not "all")
    0 2 5 | 0,2,5 | 0-7       global ranks, lists and inclusive ranges (a range is kept
                              as a ``range``, never built into a list)
    pp-stage-leaders          one rank per pipeline stage (tp=0, dp=0, cp=0, ep=0)
    first-pp-stage, last-pp-stage
    tp=0,dp=0,pp=*            coordinate filter over tp, pp, dp, cp, ep (int, range or *)
    node=K                    every rank on node K (K may be a range)
"""

import re

from ..errors import ConfigError

FLAG = "--profile-ranks"
# No job has this many ranks (the largest runs have ~10**5): a rank at or past it is a typo,
# refused rather than resolved. Ranges stay ``range`` objects (membership, length and text
# without building the list), so ``0-1048575`` costs what ``0-7`` does.
MAX_WORLD_SIZE = 1 << 20
COORDINATES = ("tp", "pp", "dp", "cp", "ep", "node")
NAMED_SELECTORS = ("pp-stage-leaders", "first-pp-stage", "last-pp-stage")
_INT = re.compile(r"^-?\d+$")
_RANGE = re.compile(r"^(\d+)-(\d+)$")
_FIX = (f"use global ranks (0 2 5), ranges (0-7), -1/all for every rank, or a selector "
        f"({', '.join(NAMED_SELECTORS)}, tp=0,dp=0,pp=*, node=K)")


def parse_rank_tokens(tokens):
    """Turn flag/YAML tokens into a canonical selection tuple (``()`` = all ranks).

    The canonical ``()`` (what a config holds for "all") is accepted as is. Anything else that
    names no rank (``''``, ``','``, ``[]``, None: an unset ``$RANKS`` in a launch script) is
    refused: on a large job silently profiling every rank would fill the disk.
    """
    if isinstance(tokens, tuple) and not tokens:
        return ()
    if tokens is None:
        tokens = []
    if isinstance(tokens, (int, str)):
        tokens = [tokens]
    items, every_rank = [], False
    for token in tokens:
        if isinstance(token, bool):
            raise ConfigError(f"{FLAG} {token!r} is not a rank; {_FIX}.")
        if isinstance(token, int):
            parts = [str(token)]
        elif isinstance(token, str):
            text = token.strip()
            parts = [text] if "=" in text else [p for p in re.split(r"[,\s]+", text) if p]
        else:
            raise ConfigError(f"{FLAG} {token!r} is not a rank; {_FIX}.")
        for part in parts:
            if part.lower() in ("-1", "all"):
                every_rank = True
                continue
            items.extend(_parse_item(part))
    if not (items or every_rank):
        shown = " ".join(repr(t) for t in tokens) if tokens else "[]"
        raise ConfigError(f"{FLAG} {shown} names no rank (an empty variable?); {_FIX}.")
    return () if every_rank else _dedupe(items)


def _parse_item(part):
    if _INT.match(part):
        rank = int(part)
        if rank < 0:
            raise ConfigError(f"{FLAG} {part} is negative; use global ranks >= 0, or -1 for "
                              f"every rank.")
        return [_possible(rank, part)]
    match = _RANGE.match(part)
    if match:
        low, high = int(match.group(1)), int(match.group(2))
        if high < low:
            raise ConfigError(f"{FLAG} range {part} runs backwards; write it as {high}-{low}.")
        _possible(high, part)
        return [low] if low == high else [range(low, high + 1)]
    lowered = part.lower()
    if lowered in NAMED_SELECTORS:
        return [lowered]
    if "=" in part:
        return [_canonical_filter(part)]
    raise ConfigError(f"{FLAG} {part!r} is not a rank or selector; {_FIX}.")


def _possible(rank, part):
    if rank >= MAX_WORLD_SIZE:
        raise ConfigError(f"{FLAG} {part}: rank {rank} is beyond any job's world size (at most "
                          f"{MAX_WORLD_SIZE:,} ranks here); name ranks of the job, e.g. 0-7, "
                          f"or -1 for every rank.")
    return rank


def item_text(item) -> str:
    """One item as the user would type it: ``5``, ``0-7``, ``tp=0,pp=*``."""
    if isinstance(item, range):
        return f"{item.start}-{item.stop - 1}"
    return str(item)


def item_json(item):
    """One item as a manifest or ``--json`` holds it (a range as its ``"0-7"`` text)."""
    return item_text(item) if isinstance(item, range) else item


def global_ranks(selection):
    """The ranks (ints and ranges) a selection names by number, selectors left out."""
    return [item for item in selection if isinstance(item, (int, range))
            and not isinstance(item, bool)]


def expand(items):
    """Ints and ranges as the ints they name (only for a bounded selection: every range is
    below ``MAX_WORLD_SIZE``)."""
    for item in items:
        if isinstance(item, range):
            yield from item
        else:
            yield item


def _canonical_filter(text):
    terms = {}
    for term in text.lower().split(","):
        key, _, value = term.partition("=")
        key, value = key.strip(), value.strip()
        if key not in COORDINATES:
            raise ConfigError(f"{FLAG} {text!r}: {key!r} is not a coordinate; use "
                              f"{', '.join(COORDINATES)}.")
        if key in terms:
            raise ConfigError(f"{FLAG} {text!r} names {key} twice; give each coordinate once.")
        if value != "*" and not _INT.match(value) and not _RANGE.match(value):
            raise ConfigError(f"{FLAG} {text!r}: {key}={value!r} must be a number, a range "
                              f"such as 0-3, or *.")
        if _INT.match(value) and int(value) < 0:
            raise ConfigError(f"{FLAG} {text!r}: {key}={value} is negative.")
        terms[key] = value
    return ",".join(f"{key}={terms[key]}" for key in COORDINATES if key in terms)


def _dedupe(items):
    seen, result = set(), []
    for item in items:
        if item not in seen:
            seen.add(item)
            result.append(item)
    return tuple(result)


def needs_topology(selection):
    return any(isinstance(item, str) for item in selection)


def format_selection(selection):
    """The selection as the user would type it back (for logs and show-config)."""
    if not selection:
        return "all"
    return " ".join(item_text(item) for item in selection)


def _value_matches(spec, value):
    if spec == "*":
        return True
    match = _RANGE.match(spec)
    if match:
        return int(match.group(1)) <= value <= int(match.group(2))
    return value == int(spec)


def resolve(selection, world_size, layout=None):
    """Global ranks selected, sorted. ``layout`` maps rank -> {tp, pp, dp, cp, ep, node}.

    Selectors need ``layout``; without it a ConfigError says so. A selection that matches no
    rank of this job is an error too, because it would silently profile nothing.
    """
    if not selection:
        return list(range(world_size))
    chosen = set()
    for item in selection:
        if isinstance(item, int):
            if item < world_size:
                chosen.add(item)
            continue
        if isinstance(item, range):  # only the part inside the job is built
            chosen.update(range(item.start, min(item.stop, world_size)))
            continue
        if layout is None:
            raise ConfigError(f"{FLAG} {item} needs the parallel layout, which is only known "
                              f"inside a Megatron job; use global rank numbers here.")
        chosen.update(_resolve_selector(item, world_size, layout))
    ranks = sorted(chosen)
    if not ranks:
        if needs_topology(selection) and layout is not None:
            raise ConfigError(f"{FLAG} {format_selection(selection)} matches no rank of this "
                              f"job (world size {world_size}): its layout has "
                              f"{_layout_ranges(layout, world_size)}; choose coordinates "
                              f"within it.")
        raise ConfigError(f"{FLAG} {format_selection(selection)} matches no rank of this job "
                          f"(world size {world_size}): ranks the job lacks are left out, and "
                          f"none is left; choose ranks below {world_size}.")
    return ranks


def beyond(selection, world_size):
    """The global ranks a selection names that the job lacks (left out, and said so): ints,
    and ranges for the parts of ranges past the job (never built), in order."""
    lacking = []
    for item in global_ranks(selection):
        if isinstance(item, range):
            if item.stop > world_size:
                part = range(max(item.start, world_size), item.stop)
                lacking.append(part if len(part) > 1 else part.start)
        elif item >= world_size:
            lacking.append(item)
    return sorted(set(lacking), key=lambda i: (i.start if isinstance(i, range) else i))


def spans_text(items) -> str:
    """``beyond``'s items as a message lists them: ``8-400000000, 9``."""
    return ", ".join(item_text(item) for item in items)


def _layout_ranges(layout, world_size):
    coords = [layout[rank] for rank in range(world_size)]
    parts = []
    for key in COORDINATES:
        values = sorted({c.get(key, 0) for c in coords})
        if values:
            parts.append(f"{key} {values[0]}" if len(values) == 1
                         else f"{key} {values[0]}-{values[-1]}")
    return ", ".join(parts)


def _resolve_selector(item, world_size, layout):
    coords = {rank: layout[rank] for rank in range(world_size)}
    if item == "pp-stage-leaders":
        return [r for r, c in coords.items()
                if all(c.get(k, 0) == 0 for k in ("tp", "dp", "cp", "ep"))]
    if item in ("first-pp-stage", "last-pp-stage"):
        stages = [c.get("pp", 0) for c in coords.values()]
        target = min(stages) if item == "first-pp-stage" else max(stages)
        return [r for r, c in coords.items() if c.get("pp", 0) == target]
    terms = dict(term.split("=") for term in item.split(","))
    return [r for r, c in coords.items()
            if all(_value_matches(spec, c.get(key, 0)) for key, spec in terms.items())]


def short_ranks(selected) -> str:
    """``0-7`` or ``0,3``: a rank list as log lines show it."""
    if not selected:
        return "none"
    if selected == list(range(selected[0], selected[-1] + 1)) and len(selected) > 2:
        return f"{selected[0]}-{selected[-1]}"
    return ",".join(str(r) for r in selected)
