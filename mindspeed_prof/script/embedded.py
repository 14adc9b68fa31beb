"""Commands a script keeps in a string and runs later: ``sh -c``, ``bash -c``, ``eval``, ``$CMD``.

Megatron-LM's own SLURM examples assemble the command in a variable
(``CMD="python -u .../pretrain_gpt.py ..."``) and run it with ``srun ... sh -c "$CMD"``.
``bodies`` finds each such string, written where it runs (``bash -c "torchrun ..."``) or assigned
to a variable that is run, and records how it runs, since that decides how flags can be added.
"""

from dataclasses import dataclass
from typing import List, Tuple

from .program import SHELLS, candidates
from .words import ASSIGNMENT_HEAD, dequote, expansion_name, line_of, quoted_span

EVAL, NEW_SHELL, SPLIT = "eval", "a new shell", "split"  # how a string is run
_SHELL_VALUED = ("-o", "+o", "-O", "+O")
_PRINTERS = ("echo", "printf")  # `echo bash -c "..."` shows a command, it does not run one


@dataclass(frozen=True)
class Body:
    """The content of one quoted string that the script runs as a command."""
    start: int  # just inside the opening quote
    end: int  # at the closing quote
    quote: str  # '"' or "'"
    statement: object  # scan.Command holding the string: a definition goes right before it
    runs: Tuple[Tuple[str, str, int], ...]  # (how, shown, line) for each place that runs it

    def hows(self):
        return {how for how, _, _ in self.runs}

    def where(self):
        return ", ".join(f"{shown} on line {line}" for _, shown, line in self.runs)


def bodies(text, commands, values) -> List[Body]:
    """Every quoted string the script runs as a command, in source order."""
    owner = {word.start: command for command in commands for word in command.words}
    found = {}
    for command in commands:
        line = line_of(text, command.words[0].start)
        for how, shown, word, name in _run_strings(command.words, values):
            if name:  # `sh -c "$CMD"`: each assignment of CMD holds a body
                spans = [(w, w.start + ASSIGNMENT_HEAD.match(w.text).end(), owner[w.start])
                         for w, _ in values.get(name, []) if w.start in owner]
            else:
                spans = [(word, word.start, command)]
            for w, start, statement in spans:
                span = quoted_span(text, start, w.end)
                if span is not None:
                    key = span[:2]
                    _, _, _, _, runs = found.get(key, (0, 0, "", None, ()))
                    found[key] = (*span, statement, runs + ((how, shown, line),))
    return [Body(*found[key]) for key in sorted(found)]


def _run_strings(words, values):
    """``(how, shown, word, variable name or None)`` for each string this command runs."""
    program = None
    for j, program, name in candidates(words, values):
        if program == "eval":
            for word in words[j + 1:]:
                yield EVAL, "eval", word, expansion_name(word.text)
            return
        if program in SHELLS:
            yield from _shell_string(words, j, program)
            return
        if program is None and name and name in values:  # `$CMD` or `srun $CMD` runs its words
            yield SPLIT, f"${name}", words[j], name
    if program is None or program in _PRINTERS:
        return
    # `docker exec ctr bash -c "$CMD"`, `ssh node bash -c ...`: another program hands the string
    # to a shell as it is
    for k in range(j + 1, len(words)):
        shell = dequote(words[k].text).rsplit("/", 1)[-1]
        if shell in SHELLS:
            yield from _shell_string(words, k, f"{program} ... {shell}")
            return


def _shell_string(words, k, shown):
    word = _dash_c_string(words, k + 1)
    if word is not None:
        yield NEW_SHELL, f"{shown} -c", word, expansion_name(word.text)


def _dash_c_string(words, k):
    """The command string of ``sh [options] -c STRING``, or None for ``sh script.sh``."""
    dash_c = False
    while k < len(words):
        option = dequote(words[k].text)
        if len(option) < 2 or option[0] not in "-+" or option == "--":
            break
        dash_c = dash_c or (option[0] == "-" and option[1] != "-" and "c" in option[1:])
        k += 2 if option in _SHELL_VALUED else 1
    return words[k] if dash_c and k < len(words) else None
