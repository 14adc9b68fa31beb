"""Adapt a training launch script: run its training command under ``mindspeed_prof.launch``.

Pure text in, text out. ``adapt_script`` picks the training command(s) among the launches
``launches.find_launches`` recognises, inserts ``-m mindspeed_prof.launch`` before the
training script's path, appends ``"${PROFILE_ARGS[@]}"`` to its arguments and defines
``PROFILE_ARGS`` just before it. Nothing else in the text changes, and adapting an adapted script
with the same flags changes nothing.
"""

import re
import shlex
from dataclasses import dataclass

from ..errors import ConfigError
from .launches import (LAUNCHER_MODULE, LAUNCHER_ONLY, TRAINING, Launch, command_lines,
                              find_launches, scan_commands)
from .scan import assignments, expansion_name, line_of, tokenize

__all__ = ["ARRAY_REF", "Adaptation", "Launch", "STRING_REF", "VARIABLE", "adapt_script",
           "find_launches", "profile_args_value"]

VARIABLE = "PROFILE_ARGS"
MARKER = "# mindspeed-prof adapt-script: the --profile* flags of the training command below."
ARRAY_REF = f'"${{{VARIABLE}[@]}}"'
STRING_REF = f"${VARIABLE}"
# A POSIX sh script has no arrays: it gets PROFILE_ARGS="..." and an unquoted $PROFILE_ARGS.
_MENTIONS_LISTED = 5  # "torchrun" in comments/strings: enough to explain, not the whole file
_POSIX_SHELLS = re.compile(r"#!\s*\S*/(?:env\s+)?(?:sh|dash|ash|ksh|mksh|posh)(?:\s|$)")


@dataclass(frozen=True)
class Adaptation:
    text: str  # the adapted script; equal to the input when nothing changed
    changed: bool
    launches: tuple  # the Launch records of the adapted training commands
    notes: tuple  # one line each: what was updated, what looks doubtful


def adapt_script(text, profile_args, lines=()):
    """Adapt every training command of ``text`` (or only those on ``lines``): an ``Adaptation``.

    ``profile_args`` are validated flag tokens, ``--profile`` included. ``lines`` (1-based) pick
    commands by any line they span, even ones not named like training. Raises ConfigError when
    no command can be chosen, listing the commands seen and why each was not taken.
    """
    commands = scan_commands(text)
    values = assignments(commands)
    launches = find_launches(text, commands)
    chosen = _choose(text, launches, set(lines))
    posix = bool(_POSIX_SHELLS.match(text))
    value, ref = profile_args_value(profile_args, posix), STRING_REF if posix else ARRAY_REF
    _refuse_foreign_definitions(text, commands, launches, values, ref)
    tokens = tokenize(text)
    edits, notes = [], []
    for launch in chosen:
        words = launch.command.words
        if not launch.adapted:
            edits.append((launch.script.start, launch.script.start, f"-m {LAUNCHER_MODULE} "))
        definition = _our_definition(text, commands, launch.command, ref)
        if definition is None:
            edits.append((words[-1].end, words[-1].end, f" {ref}"))
            edits.append(_new_definition(text, tokens, launch.command, f"{VARIABLE}={value}"))
        elif definition.text != f"{VARIABLE}={value}":
            start = definition.start + len(VARIABLE) + 1
            edits.append((start, definition.end, value))
            notes.append(f"line {line_of(text, start)}: {VARIABLE} was {text[start:definition.end]}"
                         f", now {value}")
        notes.extend(_doubled_flags(launch, values))
    adapted = text
    for start, end, new in sorted(edits, reverse=True):
        adapted = adapted[:start] + new + adapted[end:]
    return Adaptation(adapted, adapted != text, tuple(chosen), tuple(notes))


def _refuse_foreign_definitions(text, commands, launches, values, ref):
    """PROFILE_ARGS is ours: a script that sets or passes its own would get doubled flags."""
    ours = set()
    for launch in launches:
        carried = [w for w in launch.command.words if VARIABLE in w.text]
        definition = _our_definition(text, commands, launch.command, ref)
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

def _choose(text, launches, lines):
    if lines:
        chosen = [l for l in launches if l.script is not None and lines & command_lines(text, l)]
        missing = sorted(lines - {n for l in chosen for n in command_lines(text, l)})
        if missing:
            raise ConfigError(_listing(
                f"no Python launch this tool can adapt is on line "
                f"{', '.join(map(str, missing))}", text, launches))
        return chosen
    training = [l for l in launches if l.verdict == TRAINING]
    if training:
        return training
    others = [l for l in launches if l.verdict == LAUNCHER_ONLY]
    if len(others) == 1:
        return others
    if others:
        raise ConfigError(_listing("several launches and none named like training; choose "
                                   "with --line N", text, launches))
    raise ConfigError(_listing("no training command found (--line N adapts the command on line N "
                               "anyway)", text, launches))


def _listing(headline, text, launches):
    """The headline, then each launch seen and why it was not taken, then stray mentions."""
    entries = {launch.line: launch.describe() for launch in launches}
    spans = [(l.command.words[0].start, l.command.words[-1].end) for l in launches]
    mentions = 0
    for match in re.finditer(r"torchrun|torch\.distributed\.(?:run|launch)|\w*train\w*\.py", text):
        line = line_of(text, match.start())
        if line in entries or any(a <= match.start() < b for a, b in spans):
            continue
        if mentions == _MENTIONS_LISTED:
            break
        mentions += 1
        entries[line] = (f"line {line}: {match.group()} appears only in a comment, string or "
                         f"heredoc, which the script does not run")
    listed = [f"  {entries[line]}" for line in sorted(entries)] or ["  (none)"]
    return "\n".join([f"{headline}. Python launches and mentions seen:"] + listed)


# ---- editing -----------------------------------------------------------------------------------

def profile_args_value(profile_args, posix=False):
    """The right-hand side of ``PROFILE_ARGS=``: a bash array, or a string for POSIX sh."""
    if not posix:
        return "(" + " ".join(shlex.quote(token) for token in profile_args) + ")"
    for token in profile_args:
        if shlex.quote(token) != token:
            raise ConfigError(f"{token!r} cannot be passed through a POSIX sh string variable "
                              f"(the script's #! line names sh); use a value without spaces or "
                              f"quotes, or a bash script")
    return '"' + " ".join(profile_args) + '"'


def _our_definition(text, commands, command, ref):
    """The ``PROFILE_ARGS=...`` word adapt-script wrote for ``command``, if it carries ``ref``.

    Ours sits right before the command: inline (``PROFILE_ARGS=(...); torchrun``) or on its own
    line under the marker comment. Any other PROFILE_ARGS belongs to the script's author.
    """
    if not command.words or command.words[-1].text != ref:
        return None
    before = [c for c in commands if c.words[-1].end <= command.list_start]
    if not before or len(before[-1].words) != 1:
        return None
    word = before[-1].words[0]
    if not word.text.startswith(f"{VARIABLE}="):
        return None
    gap = text[word.end:command.list_start]
    if gap == "; ":
        return word
    line_begin = text.rfind("\n", 0, word.start) + 1
    marker_begin = text.rfind("\n", 0, max(line_begin - 1, 0)) + 1
    marked = text[marker_begin:line_begin].strip() == MARKER
    return word if marked and not gap.strip() and gap.count("\n") == 1 else None


def _new_definition(text, tokens, command, assignment):
    """Own lines before the statement when it starts a line, else ``NAME=...; `` in front of it.

    A statement continued from the line above (``nohup \\``) or following ``then``/``do``/a case
    pattern on its line takes the inline form, which is valid wherever a command is.
    """
    start = command.list_start
    line_begin = text.rfind("\n", 0, start) + 1
    indent = text[line_begin:start]
    previous = [t for t in tokens if t.end <= start][-1:]
    starts_line = not indent.strip() and (not previous or previous[0].kind == "newline")
    if starts_line:
        return line_begin, line_begin, f"{indent}{MARKER}\n{indent}{assignment}\n"
    return start, start, f"{assignment}; "


def _doubled_flags(launch, values):
    notes, words = [], launch.command.words
    for word in words[words.index(launch.script) + 1:]:
        name = expansion_name(word.text)
        if name == VARIABLE:
            continue
        found = [w for _, ws in values.get(name or "", []) for w in ws] if name else [word.text]
        flags = sorted({w.split("=", 1)[0] for w in found if w.startswith("--profile")})
        if flags:
            where = f"${name}" if name else "the command"
            notes.append(f"line {launch.line}: {where} already passes {', '.join(flags)}; "
                         f"{VARIABLE} comes after it on the command line, so its values win")
    return notes
