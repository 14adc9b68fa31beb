"""The options a launch already passes after its entry script, variables followed to where they
are assigned (``$GPT_ARGS``, ``"${ARGS[@]}"``, ``${options}`` inside a command string, an array
that extends itself). Each comes with its place in the text, so the adapter can say where a
``--profile*`` flag is doubled and leave ``--use-pytorch-profiler`` out of the copy.
"""

import re
from typing import Dict, Iterator, NamedTuple, Optional, Set, Tuple

from .carry import VARIABLE
from .words import ASSIGNMENT_HEAD, dequote, line_of

# Megatron's own torch.profiler: the training refuses it beside mindspeed_prof's at start-up.
HOST_PROFILER = "--use-pytorch-profiler"
_NAME = re.compile(r"(?<!\\)\$\{?([A-Za-z_][A-Za-z0-9_]*)")
# An option written as a word of its own inside an assignment: after a blank, `(`, a quote or `=`.
_OPTION = re.compile(r"""(?<![^\s("'=])(--[A-Za-z0-9][\w-]*)(?=[\s)"'\\=]|$)""")


class Passed(NamedTuple):
    flag: str  # the option's name, without `=value`
    start: int  # where the option is written
    end: int
    name: Optional[str]  # the variable it is assigned to, None when written in the command


def passed(text: str, launch, values: dict) -> Iterator[Passed]:
    """Every option ``launch`` passes after its entry script, in the order first seen."""
    words = launch.command.words
    seen: Set[str] = set()
    found: Dict[Tuple[int, int], Passed] = {}
    # under the launcher already, `script` is the word `mindspeed_prof.launch`: skip the entry too
    for word in words[words.index(launch.script) + 1 + launch.adapted:]:
        if VARIABLE in word.text:
            continue  # ours
        literal = dequote(word.text)
        if literal.startswith("--") and "\0" not in literal:
            found.setdefault((word.start, word.end), Passed(literal.split("=", 1)[0], word.start,
                                                           word.end, None))
        for name in _NAME.findall(word.text):
            for item in _assigned(name, values, seen):
                found.setdefault(item[1:3], item)
    return iter(found.values())


def _assigned(name, values, seen):
    if name in seen or name == VARIABLE:
        return
    seen.add(name)
    for word, _ in values.get(name, []):
        head = ASSIGNMENT_HEAD.match(word.text).end()
        for match in _OPTION.finditer(word.text, head):
            yield Passed(match.group(1), word.start + match.start(1), word.start + match.end(1),
                         name)
        for inner in _NAME.findall(word.text, head):
            yield from _assigned(inner, values, seen)


def doubled_profile_flags(launch, found):
    """Notes for ``--profile*`` flags the command already passes: PROFILE_ARGS's come last."""
    groups = {}
    for item in found:
        if item.flag.startswith("--profile"):
            groups.setdefault(item.name, set()).add(item.flag)
    return [f"line {launch.line}: {f'${name}' if name else 'the command'} already passes "
            f"{', '.join(sorted(flags))}; {VARIABLE} comes after it on the command line, so its "
            f"values win" for name, flags in groups.items()]


def removal(text, item):
    """The edit that takes ``item`` out of the text: its whole line when it stands alone there
    (an array written one option a line), else with the blanks before it (or after it)."""
    start, end = item.start, item.end
    while start > 0 and text[start - 1] in " \t":
        start -= 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    alone = (start == 0 or text[start - 1] == "\n") and not text[end:line_end].strip()
    continued = re.search(r"\\\r?\n$", text[max(start - 3, 0):start]) is not None
    if alone and not continued:  # after `\` + newline the line must stay, or the next one joins
        return start, min(line_end + 1, len(text)), ""
    if start == item.start:
        while end < len(text) and text[end] in " \t":
            end += 1
    return start, end, ""


def host_profiler_refusal(text, launch, items):
    where = ", ".join(dict.fromkeys(
        f"{'$' + item.name + ' on' if item.name else 'the command on'} line "
        f"{line_of(text, item.start)}"
        for item in items))
    return (f"line {launch.line}: the training command passes {HOST_PROFILER} ({where}), which "
            f"starts Megatron's own torch.profiler: under mindspeed_prof the training refuses it "
            f"at start-up, as two profilers cannot run in one process. Run adapt-script again "
            f"with --drop-use-pytorch-profiler to leave it out of the copy (the original is not "
            f"changed), or delete it from the script; mindspeed_prof writes the trace")
