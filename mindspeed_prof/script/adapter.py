"""Adapt a launch script: run its training (or inference) command under ``mindspeed_prof.launch``.

Pure text in, text out. ``adapt_script`` picks the training command(s) among the launches
``launches.find_launches`` recognises, inserts ``-m mindspeed_prof.launch`` before the
entry script's path, appends ``"${PROFILE_ARGS[@]}"`` to its arguments and defines
``PROFILE_ARGS`` just before it. A command held in text the script runs (``CMD="python ..."``
then ``srun sh -c "$CMD"``, an ``sbatch <<EOF`` heredoc) is edited there, and ``PROFILE_ARGS`` is
defined where that text expands (see ``carry``). Nothing else in the text changes (but a
``--use-pytorch-profiler`` dropped on request), inserted lines keep the file's line endings, and
adapting an adapted script with the same flags changes nothing.
"""

from dataclasses import dataclass
from functools import partial
from typing import Iterable, Sequence, Tuple

from ..errors import ConfigError
from .carry import (ARRAY_REF, MARKER, MARKERS, STRING_REF, VARIABLE, profile_args_value,
                    reference, value)
from .embedded import bodies
from .launches import (BLOCKED, INFERENCE, LAUNCHER_MODULE, LAUNCHER_ONLY, TRAINING, Launch,
                       command_lines, find_launches, scan_commands)
from .listing import listing
from .passed import (HOST_PROFILER, doubled_profile_flags, host_profiler_refusal, passed,
                     removal)
from .program import posix_script
from .scan import assignments, tokenize
from .words import line_of

__all__ = ["ARRAY_REF", "Adaptation", "Launch", "STRING_REF", "VARIABLE", "adapt_script",
           "find_launches", "profile_args_value"]


@dataclass(frozen=True)
class Adaptation:
    text: str  # the adapted script; equal to the input when nothing changed
    changed: bool
    launches: Tuple[Launch, ...]  # the Launch records of the adapted commands
    notes: Tuple[str, ...]  # one line each: what was updated, what looks doubtful


def adapt_script(text: str, profile_args: Sequence[str], lines: Iterable[int] = (),
                 drop_use_pytorch_profiler: bool = False) -> Adaptation:
    """Adapt every training command of ``text`` (or only those on ``lines``): an ``Adaptation``.

    ``profile_args`` are validated flag tokens, ``--profile`` included. ``lines`` (1-based) pick
    commands by any line they span, even ones not named like training. Raises ConfigError when
    no command can be chosen, listing the commands seen and why each was not taken, and when a
    chosen command passes ``--use-pytorch-profiler``, unless ``drop_use_pytorch_profiler`` asks
    to leave it out of the copy.
    """
    commands = scan_commands(text)
    posix = posix_script(text)
    found_bodies = bodies(text, commands, assignments(commands), posix)
    launches = find_launches(text, commands, found_bodies)
    # Commands a definition can precede: the script's, and those of heredocs taken as written.
    code = commands + [c for b in found_bodies if b.literal for c in b.commands or ()]
    chosen = _choose(text, commands, launches, set(lines),
                     partial(listing, text=text, commands=commands, launches=launches,
                             found_bodies=found_bodies, profile_args=profile_args, posix=posix))
    _refuse_foreign_definitions(text, code, launches, assignments(code), posix)
    values = assignments(commands)
    edits, notes = set(), _unchosen_notes(launches, chosen)
    for launch in chosen:
        found = list(passed(text, launch, launch.held.values if launch.held else values))
        hosts = [item for item in found if item.flag == HOST_PROFILER]
        if hosts and not drop_use_pytorch_profiler:
            raise ConfigError(host_profiler_refusal(text, launch, hosts))
        dropped = {(item.start, item.end) for item in hosts}
        # the flags go after the last word that stays (a dropped last word takes its line along)
        words = [w for w in launch.command.words if (w.start, w.end) not in dropped]
        ref, new = reference(launch, posix), value(launch, profile_args, posix)
        if not launch.adapted:
            edits.add((launch.script.start, launch.script.start, f"-m {LAUNCHER_MODULE} "))
        definition = _our_definition(text, code, launch, ref)
        if definition is None:
            edits.add((words[-1].end, words[-1].end, f" {ref}"))
            edits.add(_new_definition(text, found_bodies, launch, f"{VARIABLE}={new}"))
        elif definition.text != f"{VARIABLE}={new}":
            start = definition.start + len(VARIABLE) + 1
            edits.add((start, definition.end, new))
            notes.append(f"line {line_of(text, start)}: {VARIABLE} was {text[start:definition.end]}"
                         f", now {new}")
        if launch.verdict == INFERENCE:
            notes.append(f"line {launch.line}: {launch.script_name} is an inference entry: the "
                         f"window flags count requests there (the first request is 1)")
        notes.extend(doubled_profile_flags(launch, found))
        for item in hosts:
            edits.add(removal(text, item))
            where = f" (in {item.name})" if item.name else ""
            notes.append(f"line {line_of(text, item.start)}: {HOST_PROFILER}{where} is left out "
                         f"of the copy; mindspeed_prof writes the trace")
    adapted = text
    for start, end, new in sorted(edits, reverse=True):
        adapted = adapted[:start] + new + adapted[end:]
    return Adaptation(adapted, adapted != text, tuple(chosen), tuple(dict.fromkeys(notes)))


def _unchosen_notes(launches, chosen):
    """Entries the default choice leaves alone, so a partly adapted script says so."""
    notes = []
    for launch in launches:
        if launch in chosen:
            continue
        if launch.verdict == BLOCKED:
            notes.append(f"{launch.describe()}: not adapted")
        elif launch.verdict == INFERENCE:
            notes.append(f"line {launch.line}: the inference entry {launch.script_name} was not "
                         f"adapted; --line {launch.line} adapts it")
    return notes


def _refuse_foreign_definitions(text, commands, launches, values, posix):
    """PROFILE_ARGS is ours: a script that sets or passes its own would get doubled flags."""
    ours = set()
    for launch in launches:
        carried = [w for w in launch.command.words if VARIABLE in w.text]
        definition = _our_definition(text, commands, launch, reference(launch, posix))
        if carried and definition is None:
            raise ConfigError(
                f"line {launch.line}: the training command already passes {carried[-1].text}, "
                f"the script's own profile flags; remove it there, or edit that variable "
                f"instead of running adapt-script")
        if definition is not None:
            ours.add(definition.start)
    for word, _ in values.get(VARIABLE, []):
        if word.start not in ours:
            raise ConfigError(
                f"line {line_of(text, word.start)} already sets {VARIABLE}, which adapt-script "
                f"defines for the training command; rename that variable in the script")


# ---- choosing --------------------------------------------------------------------------------

def _choose(text, commands, launches, lines, listing):
    if lines:
        chosen = [l for l in launches if l.script is not None and lines & command_lines(text, l)]
        missing = sorted(lines - {n for l in chosen for n in command_lines(text, l)})
        if missing:
            raise ConfigError(listing(f"no Python launch this tool can adapt is on line "
                                      f"{', '.join(map(str, missing))}"))
        return chosen
    for verdict in (TRAINING, INFERENCE):  # a train-then-generate script profiles the training
        picked = [l for l in launches if l.verdict == verdict]
        if picked:
            return picked
    if any(l.verdict == BLOCKED for l in launches):
        raise ConfigError(listing("the training command cannot be adapted where it is written "
                                  "(the reason is below); fix that, or choose another command "
                                  "with --line N"))
    others = [l for l in launches if l.verdict == LAUNCHER_ONLY]
    if len(others) == 1:
        return others
    if others:
        raise ConfigError(listing("several launches and none named like training; choose with "
                                  "--line N"))
    raise ConfigError(listing("no training command found (--line N adapts the command on line N "
                              "anyway)"))


# ---- editing -----------------------------------------------------------------------------------

def _our_definition(text, commands, launch, ref):
    """The ``PROFILE_ARGS=...`` word adapt-script wrote for ``launch``, if it carries ``ref``.

    Ours sits right before the launch's statement: inline (``PROFILE_ARGS=(...); torchrun``) or
    on its own line under the marker comment. Any other PROFILE_ARGS belongs to the script's
    author.
    """
    command = launch.statement
    if not launch.command.words or launch.command.words[-1].text != ref:
        return None
    before = [c for c in commands if c.words[-1].end <= command.list_start]
    if not before:
        return None
    last = max(before, key=lambda c: c.words[-1].end)
    if len(last.words) != 1:
        return None
    word = last.words[0]
    if not word.text.startswith(f"{VARIABLE}="):
        return None
    gap = text[word.end:command.list_start]
    if gap == "; ":
        return word
    line_begin = text.rfind("\n", 0, word.start) + 1
    marker_begin = text.rfind("\n", 0, max(line_begin - 1, 0)) + 1
    marked = text[marker_begin:line_begin].strip() in MARKERS.values()
    return word if marked and not gap.strip() and gap.count("\n") == 1 else None


def _new_definition(text, found_bodies, launch, assignment):
    """Own lines before the statement when it starts a line, else ``NAME=...; `` in front of it.

    A statement continued from the line above (``nohup \\``) or following ``then``/``do``/a case
    pattern on its line takes the inline form, which is valid wherever a command is. Own lines
    end as the statement's line does (LF or CRLF). A statement inside a heredoc taken as written
    is judged by that heredoc's own tokens.
    """
    start = launch.statement.list_start
    around = [b for b in found_bodies if b.literal and b.start <= start < b.end]
    region = max(around, key=lambda b: b.start) if around else None
    tokens = tokenize(text) if region is None else tokenize(text[:region.end], region.start)
    line_begin = text.rfind("\n", 0, start) + 1
    indent = text[line_begin:start]
    previous = [t for t in tokens if t.end <= start][-1:]
    starts_line = not indent.strip() and (not previous or previous[0].kind == "newline")
    if starts_line:
        line_end = text.find("\n", start)
        newline = "\r\n" if line_end > 0 and text[line_end - 1] == "\r" else "\n"
        marker = MARKERS.get(launch.verdict, MARKER)
        return line_begin, line_begin, f"{indent}{marker}{newline}{indent}{assignment}{newline}"
    return start, start, f"{assignment}; "
