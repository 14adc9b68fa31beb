"""Shell text a script runs later: strings (``sh -c``, ``eval``, ``$CMD``) and heredocs (``bash <<EOF``).

Megatron-LM's SLURM examples assemble the command in a variable (``CMD="python -u
.../pretrain_gpt.py ..."``) and run it with ``srun ... sh -c "$CMD"``, or feed ``sbatch`` a heredoc
whose ``bash -c "${TRAINING_CMD}"`` runs it. ``bodies`` finds each such piece of text: a string
written where it runs (``bash -c "torchrun ..."``), the assignments of a variable that is run
(``sh -c "$CMD"``, ``$CMD``) or pasted into text that runs (``sh -c "${CMD} | tee log"``,
``eval "${CMD} --x"``), and a heredoc that a shell or sbatch reads as its script. Each body records
how its text travels until it is a command's words (``Run.steps``) and where a definition made
for it must go (``Body.statement``), since both decide how flags can be added.
"""

from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional, Tuple

from .program import SHELLS, candidates, posix_script, stdin_input
from .scan import assignments, scan
from .words import ASSIGNMENT_HEAD, ScanError, dequote, expansion_name, line_of, quoted_span

EVAL, NEW_SHELL, SPLIT = "eval", "a new shell", "split"  # how a string is run
# The steps text goes through before it is words: parsed as shell code (quotes removed), split at
# blanks (quotes kept), read as the inside of "..." or of '...' by the shell that runs it.
CODE, WORDS, DOUBLE, SINGLE = "code", "words", "double quotes", "single quotes"
_SHELL_VALUED = ("-o", "+o", "-O", "+O")
_PRINTERS = ("echo", "printf")  # `echo bash -c "..."` shows a command, it does not run one


class _Item(NamedTuple):
    """Text one command runs: a string (or ``$NAME``) word, or a heredoc read as a script."""
    kind: str  # "string" or "heredoc"
    how: str
    shown: str
    target: object  # the word Token, or the scan.Heredoc
    offset: int = 0  # where the string starts in its word (`--wrap=` comes first)
    posix: Optional[bool] = None  # a heredoc's reader has no arrays (None: its #! line tells)


class Run(NamedTuple):
    how: str  # EVAL, NEW_SHELL or SPLIT
    shown: str  # "sh -c", "eval", "$CMD", "sbatch <<EOF" ...
    line: int
    steps: Tuple[str, ...]  # CODE, WORDS, DOUBLE, SINGLE, outermost first


@dataclass(frozen=True)
class Body:
    """One piece of text the script runs: a quoted string, or a heredoc read as a script."""
    start: int  # just inside the opening quote, or the heredoc's first line
    end: int  # at the closing quote, or the heredoc's delimiter line
    quote: str  # '"', "'", "<<" (a heredoc that expands) or "<<'" (one taken as written)
    statement: object  # scan.Command a definition made for this text goes right before
    runs: Tuple[Run, ...]  # each place that runs it
    expands: bool  # `$PROFILE_ARGS` written here expands before the text runs (a "..." string)
    posix: bool  # the shell that evaluates a reference written here has no arrays
    commands: Optional[list] = field(default=None, compare=False, repr=False)  # None: unreadable
    values: dict = field(default_factory=dict, compare=False, repr=False)  # assignments seen

    @property
    def literal(self):
        """A script of its own (``bash <<'EOF'``): definitions go inside it."""
        return self.quote == "<<'"

    def hows(self):
        return {run.how for run in self.runs}

    def steps(self):
        return {run.steps for run in self.runs}

    def what(self):
        return "heredoc" if self.quote.startswith("<<") else "string"

    def where(self):
        return ", ".join(dict.fromkeys(f"{run.shown} on line {run.line}" for run in self.runs))


@dataclass
class _Scope:
    """Where commands are written: the script, a heredoc taken as written, or expanding text."""
    values: dict  # the assignments a `$NAME` written here refers to
    posix: bool
    paste: Optional[tuple] = None  # the expanding body these commands are written in
    heredoc: bool = False  # that body is a heredoc: the outer shell expands it, then it runs
    statement: object = None  # where a definition for text written here goes (None: its command)


def bodies(text: str, commands: list, values: dict, posix: bool = False) -> List[Body]:
    """Every piece of text the script runs, in source order (nested ones included)."""
    found: Dict[tuple, dict] = {}  # (start, end) -> the Body's fields, runs still to resolve
    pastes: Dict[tuple, list] = {}  # body -> the bodies its text is pasted into
    owner: dict = {}  # word offset -> the command it belongs to
    queue = [(commands, _Scope(values, posix))]
    while queue:
        written, scope = queue.pop(0)
        owner.update({word.start: command for command in written for word in command.words})
        for command in written:
            line = line_of(text, command.words[0].start)
            for item in _runs(command, scope.values):
                for key, body, inner in _found(text, command, line, item, scope, owner, pastes):
                    if key in found:
                        found[key]["runs"] += body["runs"]
                        continue
                    found[key] = body
                    if inner is not None:
                        queue.append((body["commands"], inner))
    for key, body in found.items():
        body["runs"] = tuple(dict.fromkeys(_resolved(key, found, pastes, set())))
    return [Body(start, end, **found[(start, end)]) for start, end in sorted(found)]


def _resolved(key, found, pastes, seen):
    """A body's runs, those of the text it is pasted into included."""
    if key in seen:
        return []
    seen.add(key)
    runs = list(found[key]["runs"]) if key in found else []
    for parent in pastes.get(key, ()):
        runs.extend(_resolved(parent, found, pastes, seen))
    return runs


def _found(text, command, line, item, scope, owner, pastes):
    """``(key, body fields, scope of its commands or None)`` for each body ``item`` names."""
    how, shown, word, offset = item.how, item.shown, item.target, item.offset
    if item.kind == "heredoc":
        yield from _heredoc(text, command, line, item, scope)
        return
    piece = text[offset:word.end]
    name = expansion_name(piece)
    if scope.paste is not None and not scope.heredoc and not (how == SPLIT and name):
        return  # inside "...": only a `$NAME` that starts a command is followed (it is pasted)
    if how == SPLIT and name and scope.paste is not None:
        runs, steps = (), None  # `"${CMD} | tee log"`: CMD's text is pasted into the body
    elif scope.heredoc:
        # Written in a heredoc the outer shell expands: the reader parses what was pasted.
        quoting = {'"': DOUBLE, "'": SINGLE}.get(piece[:1], CODE)
        how, steps = NEW_SHELL, (quoting,) + ((WORDS,) if how == SPLIT else (CODE,))
    else:
        steps = (WORDS,) if how == SPLIT else (CODE,)
    if steps is not None:
        runs = (Run(how, shown, line, steps),)
    if name:  # each assignment of NAME holds a body
        spans = [(w, w.start + ASSIGNMENT_HEAD.match(w.text).end(), owner[w.start])
                 for w, _ in scope.values.get(name, []) if w.start in owner]
    else:
        spans = [(word, offset, scope.statement or command)]
    for w, start, statement in spans:
        span = quoted_span(text, start, w.end)
        if span is None:
            continue
        key, quote = span[:2], span[2]
        if steps is None:
            pastes.setdefault(key, []).append(scope.paste)
        expands = quote == '"' or (scope.heredoc and not name)
        inner = None
        fields = dict(quote=quote, statement=statement, runs=runs, expands=expands,
                      posix=scope.posix, values=scope.values,
                      commands=_commands(text, *key))
        if quote == '"' and fields["commands"] is not None:
            inner = _Scope(scope.values, scope.posix, paste=key, statement=statement)
        yield key, fields, inner


def _heredoc(text, command, line, item, scope):
    if scope.paste is not None:
        return  # a heredoc inside expanding text: not followed
    heredoc = item.target
    key = (heredoc.start, heredoc.end)
    reader_posix = item.posix
    if reader_posix is None:
        reader_posix = posix_script(text[heredoc.start:heredoc.end])
    inner_commands = _commands(text, *key)
    if heredoc.quoted:
        inner_values = assignments(inner_commands or [])
        inner = _Scope(inner_values, reader_posix)
    else:
        inner_values = scope.values
        inner = _Scope(scope.values, scope.posix, paste=key, heredoc=True, statement=command)
    fields = dict(quote="<<'" if heredoc.quoted else "<<", statement=command,
                  runs=(Run(NEW_SHELL, item.shown, line, (CODE,)),), expands=not heredoc.quoted,
                  posix=reader_posix if heredoc.quoted else scope.posix, values=inner_values,
                  commands=inner_commands)
    yield key, fields, inner if inner_commands is not None else None


def _commands(text, start, end):
    try:
        return scan(text, start, end)
    except ScanError:
        return None  # not shell code this scanner follows: its mentions are listed as such


def _runs(command, values):
    """An ``_Item`` for each text this command runs."""
    words, program = command.words, None
    for j, program, name in candidates(words, values):
        if program == "eval":
            for word in words[j + 1:]:
                yield _Item("string", EVAL, "eval", word, word.start)
            return
        if program in SHELLS:
            yield from _shell_input(command, j, program)
            return
        if program == "sbatch":
            yield from _sbatch_input(command, j)
            return
        if program is None and name and name in values:  # `$CMD` or `srun $CMD` runs its words
            yield _Item("string", SPLIT, f"${name}", words[j], words[j].start)
    if program is None or program in _PRINTERS:
        return
    # `docker exec ctr bash -c "$CMD"`, `ssh node bash -s <<EOF`: another program hands the text
    # to a shell as it is
    for k in range(j + 1, len(words)):
        shell = dequote(words[k].text).rsplit("/", 1)[-1]
        if shell in SHELLS:
            yield from _shell_input(command, k, f"{program} ... {shell}")
            return


def _shell_input(command, k, shown):
    """``sh [options] -c STRING``, or the heredoc/here-string of ``sh [options]`` (no script)."""
    words, dash_c, stdin = command.words, False, False
    k += 1
    while k < len(words):
        option = dequote(words[k].text)
        if len(option) < 2 or option[0] not in "-+" or option == "--":
            break
        short = option[0] == "-" and option[1] != "-"
        dash_c = dash_c or (short and "c" in option[1:])
        stdin = stdin or (short and "s" in option[1:])
        k += 2 if option in _SHELL_VALUED else 1
    if dash_c:
        if k < len(words):
            yield _Item("string", NEW_SHELL, f"{shown} -c", words[k], words[k].start)
        return
    if k < len(words) and not stdin:
        return  # `bash train.sh`: a script file, whatever stdin holds
    program = shown.rsplit(" ", 1)[-1]
    yield from _stdin(command, program, program not in ("bash", "zsh"))


def _sbatch_input(command, j):
    """``sbatch --wrap "..."`` (run by sh), or the batch script sbatch reads from its stdin."""
    words = command.words
    for k in range(j + 1, len(words)):
        text = words[k].text
        if text == "--wrap" and k + 1 < len(words):
            yield _Item("string", NEW_SHELL, "sbatch --wrap", words[k + 1], words[k + 1].start)
            return
        if text.startswith("--wrap="):
            yield _Item("string", NEW_SHELL, "sbatch --wrap", words[k],
                        words[k].start + len("--wrap="))
            return
        if dequote(text).endswith((".sh", ".bash", ".sbatch", ".slurm")):
            return  # a batch script file: stdin is not read
    yield from _stdin(command, "sbatch", None)


def _stdin(command, program, posix):
    """The text a program reads as its script from stdin: the last heredoc or here-string on fd 0.

    ``posix`` None: the script's own #! line tells (sbatch runs the batch script with it).
    """
    found = stdin_input(command)
    if found is None:
        return
    kind, what = found
    if kind == "here-string":
        yield _Item("string", NEW_SHELL, f"{program} <<<", what, what.start)
        return
    redirect = what.operator.text.lstrip("0123456789")
    yield _Item("heredoc", NEW_SHELL, f"{program} {redirect}{what.word}", what, posix=posix)
