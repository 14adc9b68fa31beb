"""Adapt a launch script: run its training (or inference) command under ``mindspeed_prof.launch``.

Pure text in, text out. ``adapt_script`` picks the training command(s) among the launches
``launches.find_launches`` recognises, inserts ``-m mindspeed_prof.launch`` before the
entry script's path, appends ``"${PROFILE_ARGS[@]}"`` to its arguments and defines
``PROFILE_ARGS`` just before it. A command held in a string the script runs (``CMD="python ..."``
then ``srun sh -c "$CMD"``) is edited inside the string, and ``PROFILE_ARGS`` is defined before
the string is. Nothing else in the text changes, inserted lines keep the file's line endings, and
adapting an adapted script with the same flags changes nothing.
"""

import re
import shlex
from dataclasses import dataclass
from typing import Iterable, Sequence, Tuple
from functools import partial

from ..errors import ConfigError
from .embedded import SPLIT, bodies
from .launches import (BLOCKED, INFERENCE, LAUNCHER_MODULE, LAUNCHER_ONLY, TRAINING, Launch,
                       command_lines, find_launches, scan_commands)
from .program import skip_prefixes
from .scan import DECLARERS, assignments, tokenize
from .words import ASSIGNMENT_HEAD, expansion_name, line_of

__all__ = ["ARRAY_REF", "Adaptation", "Launch", "STRING_REF", "VARIABLE", "adapt_script",
           "find_launches", "profile_args_value"]

VARIABLE = "PROFILE_ARGS"
MARKER = "# mindspeed-prof adapt-script: the --profile* flags of the training command below."
MARKERS = {TRAINING: MARKER, INFERENCE: MARKER.replace("training", "inference")}
ARRAY_REF = f'"${{{VARIABLE}[@]}}"'
STRING_REF = f"${VARIABLE}"
# A POSIX sh script has no arrays: it gets PROFILE_ARGS="..." and an unquoted $PROFILE_ARGS.
_MENTIONS_LISTED = 5  # "torchrun" in comments/strings: enough to explain, not the whole file
_POSIX_SHELLS = re.compile(r"#!\s*\S*/(?:env\s+)?(?:sh|dash|ash|ksh|mksh|posh)(?:\s|$)")


@dataclass(frozen=True)
class Adaptation:
    text: str  # the adapted script; equal to the input when nothing changed
    changed: bool
    launches: Tuple[Launch, ...]  # the Launch records of the adapted commands
    notes: Tuple[str, ...]  # one line each: what was updated, what looks doubtful


def adapt_script(text: str, profile_args: Sequence[str], lines: Iterable[int] = ()) -> Adaptation:
    """Adapt every training command of ``text`` (or only those on ``lines``): an ``Adaptation``.

    ``profile_args`` are validated flag tokens, ``--profile`` included. ``lines`` (1-based) pick
    commands by any line they span, even ones not named like training. Raises ConfigError when
    no command can be chosen, listing the commands seen and why each was not taken.
    """
    commands = scan_commands(text)
    values = assignments(commands)
    launches = find_launches(text, commands)
    chosen = _choose(text, commands, launches, set(lines))
    posix = bool(_POSIX_SHELLS.match(text))
    _refuse_foreign_definitions(text, commands, launches, values, posix)
    tokens = tokenize(text)
    edits, notes = set(), _unchosen_notes(launches, chosen)
    for launch in chosen:
        words = launch.command.words
        ref, value = _reference(launch, posix), _value(launch, profile_args, posix)
        if not launch.adapted:
            edits.add((launch.script.start, launch.script.start, f"-m {LAUNCHER_MODULE} "))
        definition = _our_definition(text, commands, launch, ref)
        if definition is None:
            edits.add((words[-1].end, words[-1].end, f" {ref}"))
            edits.add(_new_definition(text, tokens, launch, f"{VARIABLE}={value}"))
        elif definition.text != f"{VARIABLE}={value}":
            start = definition.start + len(VARIABLE) + 1
            edits.add((start, definition.end, value))
            notes.append(f"line {line_of(text, start)}: {VARIABLE} was {text[start:definition.end]}"
                         f", now {value}")
        if launch.verdict == INFERENCE:
            notes.append(f"line {launch.line}: {launch.script_name} is an inference entry: the "
                         f"window flags count requests there (the first request is 1)")
        notes.extend(_doubled_flags(launch, values))
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
        definition = _our_definition(text, commands, launch, _reference(launch, posix))
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

def _choose(text, commands, launches, lines):
    listing = partial(_listing, text=text, commands=commands, launches=launches)
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


def _listing(headline, text, commands, launches):
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
        entries[line] = f"line {line}: {match.group()} {_mention(text, commands, match.start())}"
    listed = [f"  {entries[line]}" for line in sorted(entries)] or ["  (none)"]
    return "\n".join([f"{headline}. Python launches and mentions seen:"] + listed)


def _mention(text, commands, offset):
    """Why a launch-like word at ``offset`` is not a launch adapt-script can edit."""
    run = [b for b in bodies(text, commands, assignments(commands)) if b.start <= offset < b.end]
    if run:
        return (f"is in a string run by {run[0].where()}, whose shell syntax adapt-script cannot "
                f"follow; add -m {LAUNCHER_MODULE} and the flags there by hand")
    holders = [c for c in commands if any(w.start <= offset < w.end for w in c.words)]
    if not holders:
        return "appears only in a comment or heredoc, which the script does not run"
    words = max(holders, key=lambda c: c.words[0].start).words
    if words[0].text in DECLARERS:  # `export CMD="..."`
        words = [w for w in words[1:] if not w.text.startswith("-")] or words
    if all(ASSIGNMENT_HEAD.match(w.text) for w in words):
        name = ASSIGNMENT_HEAD.match(words[0].text).group().rstrip("+=")
        return (f"is in the string assigned to {name}, which the script never runs as a command "
                f"(sh -c \"${name}\", bash -c, eval or ${name})")
    program = words[min(skip_prefixes(words), len(words) - 1)].text
    return (f"is in an argument of {program}, which adapt-script does not follow; add "
            f"-m {LAUNCHER_MODULE} and the flags there by hand")


# ---- editing -----------------------------------------------------------------------------------

def profile_args_value(profile_args: Sequence[str], posix: bool = False) -> str:
    """The right-hand side of ``PROFILE_ARGS=``: a bash array, or a string for POSIX sh."""
    if not posix:
        return "(" + " ".join(shlex.quote(token) for token in profile_args) + ")"
    return _plain_string(profile_args, "a POSIX sh string variable (the script's #! line names "
                                       "sh)", "or a bash script")


def _plain_string(profile_args, carrier, alternative):
    for token in profile_args:
        if shlex.quote(token) != token:
            raise ConfigError(f"{token!r} cannot be passed through {carrier}; use a value "
                              f"without spaces or quotes, {alternative}")
    return '"' + " ".join(profile_args) + '"'


def _reference(launch, posix):
    """How the command refers to the flags: the array, or ``$PROFILE_ARGS`` in a string.

    In a double-quoted string the reference expands when the string is made, so the value of
    PROFILE_ARGS is shell text the string's runner parses (``sh -c``, ``eval``); a single-quoted
    string is only adapted when ``eval`` runs it in this shell, where the array itself reaches.
    """
    held = launch.held is not None and launch.held.quote == '"'
    return STRING_REF if posix or held else ARRAY_REF


def _value(launch, profile_args, posix):
    """The right-hand side of ``PROFILE_ARGS=`` for ``launch``."""
    body = launch.held
    if body is None or body.quote == "'":
        return profile_args_value(profile_args, posix)
    if SPLIT in body.hows():  # `$CMD` as a command: split into words, quotes stay as they are
        return _plain_string(profile_args, f"a string run by {body.where()}, which splits "
                                           f"words but removes no quotes",
                             'or run that string with sh -c "..." or eval')
    shell_text = " ".join(shlex.quote(token) for token in profile_args)
    plain = all(shlex.quote(token) == token for token in profile_args)
    return f'"{shell_text}"' if plain else shlex.quote(shell_text)


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


def _new_definition(text, tokens, launch, assignment):
    """Own lines before the statement when it starts a line, else ``NAME=...; `` in front of it.

    A statement continued from the line above (``nohup \\``) or following ``then``/``do``/a case
    pattern on its line takes the inline form, which is valid wherever a command is. Own lines
    end as the statement's line does (LF or CRLF).
    """
    start = launch.statement.list_start
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
