"""What a refusal of adapt-script says: each launch seen and why it was not taken, each mention of
a launcher that is no launch (and the true reason), and how to add the flags by hand.
"""

import re
import shlex

from .carry import ARRAY_REF, MARKER, STRING_REF, VARIABLE, profile_args_value
from .launches import BLOCKED, LAUNCHER_MODULE
from .program import SHELLS, skip_prefixes
from .scan import DECLARERS
from .words import ASSIGNMENT_HEAD, line_of

_MENTIONS_LISTED = 5  # "torchrun" in comments/strings: enough to explain, not the whole file
_MENTION = re.compile(r"torchrun|torch\.distributed\.(?:run|launch)|\w*train\w*\.py")
_PRINTERS = ("echo", "printf")


def listing(headline, text, commands, launches, found_bodies, profile_args, posix):
    """The headline, each launch seen and why it was not taken, stray mentions, the way by hand."""
    entries = {launch.line: launch.describe() for launch in launches}
    spans = [(l.command.words[0].start, l.command.words[-1].end) for l in launches]
    mentions = []
    for match in _MENTION.finditer(text):
        line = line_of(text, match.start())
        if line in entries or any(a <= match.start() < b for a, b in spans):
            continue
        if len(mentions) == _MENTIONS_LISTED:
            break
        reason, edit_line = _mention(text, commands, found_bodies, match.start())
        if edit_line:  # it may run: the user can add the flags where adapt-script cannot
            mentions.append((match, edit_line))
        entries[line] = f"line {line}: {match.group()} {reason}"
    listed = [f"  {entries[line]}" for line in sorted(entries)] or ["  (none)"]
    lines = [f"{headline}. Python launches and mentions seen:"] + listed
    blocked = [launch for launch in launches if launch.verdict == BLOCKED]
    if blocked:
        lines += by_hand_in_string(text, blocked[0], profile_args)
    elif mentions:
        trained = [m for m in mentions if "train" in m[0].group()] or mentions
        lines += by_hand(trained[0][1], profile_args, posix)
    return "\n".join(lines)


def by_hand(line, profile_args, posix):
    """Where the two PROFILE_ARGS lines go and what the command gains, for a command at ``line``."""
    flags = " ".join(shlex.quote(token) for token in profile_args)
    string = shlex.quote(flags) if any(shlex.quote(t) != t for t in profile_args) else f'"{flags}"'
    ref = STRING_REF if posix else ARRAY_REF
    definition = f"{VARIABLE}={string}" if posix else f"{VARIABLE}={profile_args_value(profile_args)}"
    return [f"To add the flags by hand, paste these two lines above the statement on line {line}:",
            f"    {MARKER}", f"    {definition}",
            f"  then, in that command, write -m {LAUNCHER_MODULE} right before the training "
            f"script and {ref} after its last argument. Where the command is inside a \"...\" "
            f"string, paste {VARIABLE}={string} above that string instead and write "
            f"{STRING_REF}."]


def by_hand_in_string(text, launch, profile_args):
    """The flags written into a string no variable of this script reaches."""
    flags = " ".join(shlex.quote(token) for token in profile_args)
    if launch.held is not None and launch.held.quote == "'":
        flags = flags.replace("'", "'\\''")  # inside '...': close, an escaped quote, reopen
    return [f"To add the flags by hand: on line {launch.line}, inside the string, write "
            f"-m {LAUNCHER_MODULE} right before {launch.script_name} and, after its last "
            f"argument, the flags themselves (no variable of this script reaches that shell):",
            f"    {flags}"]


def _mention(text, commands, found_bodies, offset):
    """``(reason, line)``: why a launch-like word at ``offset`` is not a launch adapt-script can
    edit, and, when it may run where adapt-script does not follow, the line of the statement to
    edit by hand (else None)."""
    inside = [b for b in found_bodies if b.start <= offset < b.end]
    body = max(inside, key=lambda b: b.start) if inside else None
    if body is not None and body.commands is None:
        return (f"is in a {body.what()} run by {body.where()}, whose shell syntax adapt-script "
                f"cannot follow", line_of(text, offset))
    written = body.commands if body is not None else commands
    holders = [c for c in written if any(w.start <= offset < w.end for w in c.words)]
    if not holders:
        return _not_in_a_command(text, commands, found_bodies, offset, body)
    words = max(holders, key=lambda c: c.words[0].start).words
    line = line_of(text, words[0].start)
    if words[0].text in DECLARERS:  # `export CMD="..."`
        words = [w for w in words[1:] if not w.text.startswith("-")] or words
    if all(ASSIGNMENT_HEAD.match(w.text) for w in words):
        name = ASSIGNMENT_HEAD.match(words[0].text).group().rstrip("+=")
        if body is not None and body.expands:
            return (f"is in the string assigned to {name} inside the {body.what()} run by "
                    f"{body.where()}, which the outer shell expands first; adapt-script does "
                    f"not follow variables set there", line)
        return _use(text, commands, found_bodies, name)
    program = words[min(skip_prefixes(words), len(words) - 1)].text
    return f"is in an argument of {program}, which adapt-script does not follow", line


def _not_in_a_command(text, commands, found_bodies, offset, body):
    every = list(commands) + [c for b in found_bodies for c in b.commands or ()]
    for command in every:
        for heredoc in command.heredocs:
            if heredoc.start <= offset < heredoc.end and (body is None or body.start < heredoc.start):
                words = command.words
                at = min(skip_prefixes(words), len(words) - 1)
                line = line_of(text, words[0].start)
                operands = [w.text for w in words[at + 1:] if not w.text.startswith("-")]
                if words[at].text.rsplit("/", 1)[-1] in SHELLS and operands:
                    return (f"is in a heredoc given to {words[at].text} {operands[0]} on line "
                            f"{line}: that script reads it as its input, adapt-script does not "
                            f"open {operands[0]}", None)
                return (f"is in a heredoc given to {words[at].text} on line {line}, which reads "
                        f"it as data, not as a script (a heredoc given to a shell or sbatch is "
                        f"adapted)", None)
    return "appears only in a comment, which the script does not run", None


def _use(text, commands, found_bodies, name):
    """What the script does with variable ``name``: the true reason its text was not followed
    (``_mention``'s pair)."""
    assigned = f"is in the string assigned to {name}, which"
    pattern = re.compile(rf"\${{?{name}\b")
    every = list(commands) + [c for b in found_bodies for c in b.commands or ()]
    for command in sorted(every, key=lambda c: c.words[0].start):
        words = command.words
        if all(ASSIGNMENT_HEAD.match(w.text) for w in words) or words[0].text in DECLARERS:
            continue
        if any(pattern.search(w.text) for w in words):
            program = words[min(skip_prefixes(words), len(words) - 1)].text
            line = line_of(text, words[0].start)
            if program in _PRINTERS:
                return f"{assigned} is only printed ({program} on line {line}), never run", None
            return (f"{assigned} is passed to {program} on line {line}; adapt-script follows sh "
                    f"-c, bash -c, eval, ${name} and heredocs given to a shell or sbatch, not "
                    f"that", line)
    return (f"{assigned} the script never runs (sh -c \"${name}\", bash -c, eval, ${name} or a "
            f"heredoc given to a shell would)", None)
