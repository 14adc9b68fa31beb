"""Which word of a simple command is the program it runs, past the wrappers people put in front.

``nohup``, ``exec``, ``time``, ``env``, ``VAR=x`` are prefixes of the shell itself; runners
(``srun -N 2``, ``timeout 3600``, ``setsid``, ``numactl ...``, ``uv run``) are programs that run the
command given after their own options; an expansion in front (``$VENV_PREFIX``) may be an empty
wrapper. ``candidates`` walks past all of them, so ``launches`` and ``embedded`` share one rule.
``stdin_input`` tells what a command reads on stdin (``bash <<EOF``).
"""

import re
from typing import Iterator, Optional, Tuple

from .words import dequote, expansion_name

# Programs that run the command given after their own options. srun/mpirun start one copy of the
# command per task, so what they run is launched the same way as under torchrun.
RUNNERS = frozenset({"uv", "conda", "poetry", "pipenv", "numactl", "taskset", "nice", "ionice",
                     "stdbuf", "timeout", "setsid", "chrt", "srun", "mpirun", "mpiexec",
                     "horovodrun"})
# Runners that start the command once per task of a distributed job.
DISTRIBUTING = frozenset({"srun", "mpirun", "mpiexec", "horovodrun"})
SHELLS = frozenset({"sh", "bash", "dash", "ash", "ksh", "mksh", "zsh"})
# A script whose #! line names one of these gets no bash arrays.
_POSIX_SHEBANG = re.compile(r"#!\s*\S*/(?:env\s+)?(?:sh|dash|ash|ksh|mksh|posh)(?:\s|$)")


def posix_script(text) -> bool:
    """Whether a script's #! line names a POSIX sh (so it has no arrays)."""
    return bool(_POSIX_SHEBANG.match(text))


def stdin_input(command):
    """What the command's stdin holds as text: ``("heredoc", scan.Heredoc)``,
    ``("here-string", word Token)``, or None (a file, a pipe, the terminal). The last redirection
    of fd 0 wins, as in the shell."""
    found = None
    for operator, target in command.redirects:
        fd, op = re.match(r"(\d*)(.*)", operator.text).groups()
        if fd not in ("", "0") or op not in ("<", "<<", "<<-", "<<<", "<>", "<&"):
            continue
        found = None
        if op in ("<<", "<<-"):
            found = next((("heredoc", h) for h in command.heredocs if h.operator == operator), None)
        elif op == "<<<" and target is not None:
            found = ("here-string", target)
    return found


def skip_prefixes(words) -> int:
    """Index of the program word, past ``VAR=x``, ``nohup``, ``exec``, ``time``, ``env``."""
    i = 0
    while i < len(words):
        word = dequote(words[i].text)
        if re.match(r"[A-Za-z_][A-Za-z0-9_]*\+?=", words[i].text) or word in ("nohup", "command"):
            i += 1
        elif word in ("exec", "time", "env"):
            i += 1
            while i < len(words) and words[i].text.startswith("-"):
                i += 2 if words[i].text in ("-a", "-u", "--unset") else 1
        else:
            break
    return i


def candidates(words, values) -> Iterator[Tuple[int, Optional[str], Optional[str]]]:
    """Where the program may be: ``(index, basename or None, variable name or None)`` in order.

    The walk goes on past an expansion (it may be an empty wrapper) and, once a runner was seen,
    to the end of the command (the runner's options come first); it ends at any other word.
    """
    runner = False
    for j in range(skip_prefixes(words), len(words)):
        program = basename(words[j].text, values)
        name = expansion_name(words[j].text)
        yield j, program, name
        runner = runner or program in RUNNERS
        if not runner and (program is not None or not name):
            return


def runners_before(words, values, index) -> set:
    """The runners among ``words[:index]`` (``{"srun", "timeout"}`` ...)."""
    return {program for j, program, _ in candidates(words, values)
            if j < index and program in RUNNERS}


def basename(text, values) -> Optional[str]:
    """The last path component of a word, when known: ``$ROOT/pretrain_gpt.py`` has one, and so
    has ``$ENTRY`` when the script assigns ENTRY a single value ending in one."""
    base = dequote(text).rsplit("/", 1)[-1]
    if "\0" not in base:
        return base
    found = {tuple(words) for _, words in values.get(expansion_name(text) or "", [])}
    if len(found) == 1 and len(only := next(iter(found))) == 1:
        base = only[0].rsplit("/", 1)[-1]
        return None if "\0" in base else base
    return None
