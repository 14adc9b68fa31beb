"""Sample outputs in docs/, held to what the commands print today (issue 35).

A sample's numbers are its run's own and differ from run to run; its words, columns and lines
must be what the command prints. ``shape`` replaces what a run decides (numbers, the host,
which operators, a rank's reason), and ``unprinted`` says which lines of a sample the command no
longer prints, in order. A line that is ``...`` (or ``…``) stands for lines left out; an
``optional`` block (a blank-line-separated section whose first line starts so) may be absent
from a run."""

import re

NUMBER = re.compile(r"[+-]?\d[\d,]*(\.\d+)?%?")
PARTS = ("Computing", "Comm(NotOvl)", "Overlapped", "Free", "-")
LEFT_OUT = ("...", "…")


def shape(line):
    """A line with its run-dependent values replaced, whitespace collapsed."""
    line = re.sub(r"host \S+", "host H", line)
    line = re.sub(r"^\s*\S+(\s+cpu_op\s)", r"OP\1", line)  # which operators: the run's
    # a change's percentage is left out where its base is 0: no "(#)" counts
    words = [w for w in NUMBER.sub("#", line).split() if w != "(#)"]
    if words[:2] == ["#", "#"] and words[-1] in PARTS:  # a rank row's EXPLAINED BY
        words[-1] = "PART"
    return " ".join(words)


def blocks(lines):
    """``lines`` in blocks, each ending with the blank line that closes it."""
    found = [[]]
    for line in lines:
        found[-1].append(line)
        if not line.strip():
            found.append([])
    return [block for block in found if block]


def unprinted(sample, printed, optional=()):
    """The lines of ``sample`` that ``printed`` lacks (by shape, in the sample's order)."""
    got = [shape(line) for line in printed]
    kept = [line for block in blocks(sample) for line in block
            if not (optional and block[0].startswith(tuple(optional))
                    and shape(block[0]) not in got)]
    missing, rest = [], iter(got)
    for line in kept:
        if line.strip() in LEFT_OUT:
            continue
        if not any(shape(line) == g for g in rest):
            missing.append(line)
            rest = iter(got)  # go on from the start: name every line that is missing
    return missing
