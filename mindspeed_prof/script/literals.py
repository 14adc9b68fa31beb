"""What a launch's own literal values say: how many ranks it starts and how many iterations it
trains, read from the command and the variables it expands (``GPUS_PER_NODE=8``,
``DISTRIBUTED_ARGS=(--nproc_per_node $GPUS_PER_NODE ...)``, ``--train-iters 200``).

Only values written once, as plain literals, count: a variable assigned twice (an ``if``/``else``
per node), one with a default the environment may override (``${NNODES:-1}``) or computed at run
time is unknown, and nothing is said about it. So adapt-script can refuse flags that cannot fit
the job before the job spends minutes building its model, and never refuses on a guess.
"""

import re
from typing import Dict, List, NamedTuple, Optional

from .scan import tokenize
from .words import ASSIGNMENT_HEAD, line_of

# `$NAME`, `${NAME}`, `${NAME[@]}`, quoted or not: the whole word is one expansion.
_WHOLE = re.compile(r'"?\$(?:\{([A-Za-z_]\w*)(?:\[[@*]\])?\}|([A-Za-z_]\w*))"?')
_NPROC = ("--nproc_per_node", "--nproc-per-node")
_NNODES = ("--nnodes",)
_DEPTH = 8


class Literal(NamedTuple):
    value: str
    where: str  # how it was found, for the message: "--nproc_per_node 8 (GPUS_PER_NODE=8, line 9)"


def _single(name: str, values: dict) -> Optional[str]:
    """The raw value text of ``name`` when it is assigned exactly once."""
    texts = set()
    for word, _ in values.get(name, []):
        head = ASSIGNMENT_HEAD.match(word.text)
        if head is None:
            return None
        texts.add(word.text[head.end():])
    return texts.pop() if len(texts) == 1 else None


def _raw_words(value: str) -> List[str]:
    """The words of an assigned value as written: an array's items, a string's blank-split parts."""
    if value.startswith("(") and value.endswith(")"):
        return [t.text for t in tokenize(value[1:-1]) if t.kind == "word"]
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return [part for part in re.split(r"\s+", value.replace("\\\n", " ")) if part]


def _expand(words: List[str], values: dict, depth: int = 0) -> List[str]:
    """Words with each whole-word expansion of an options variable replaced by its words."""
    out: List[str] = []
    for word in words:
        match = _WHOLE.fullmatch(word)
        raw = _single(match.group(1) or match.group(2), values) if match else None
        if raw is not None and depth < _DEPTH and any(
                w.startswith("-") for w in _raw_words(raw)):
            out.extend(_expand(_raw_words(raw), values, depth + 1))
        else:
            out.append(word)
    return out


def _scalar(word: str, values: dict, text: str, depth: int = 0) -> Optional[Literal]:
    """A plain literal, or a variable assigned once to one (followed through variables)."""
    plain = word.strip("\"'")
    if "$" not in plain and "`" not in plain:
        return Literal(plain, "")
    match = _WHOLE.fullmatch(word)
    if match is None or depth >= _DEPTH:
        return None
    name = match.group(1) or match.group(2)
    raw = _single(name, values)
    if raw is None:
        return None
    found = _scalar(raw, values, text, depth + 1)
    if found is None:
        return None
    word_token = values[name][0][0]
    here = f"{name}={raw} on line {line_of(text, word_token.start)}"
    return Literal(found.value, f"{here}, {found.where}" if found.where else here)


def options(words: List[str], values: dict, text: str) -> Dict[str, Literal]:
    """``--option value`` pairs of ``words`` (variables expanded) whose value is a literal; the
    last occurrence wins, as argparse takes it."""
    found: Dict[str, Literal] = {}
    expanded = _expand(words, values)
    for i, word in enumerate(expanded):
        plain = word.strip("\"'")
        if not plain.startswith("--"):
            continue
        name, eq, value = plain.partition("=")
        raw = value if eq else (expanded[i + 1] if i + 1 < len(expanded) else None)
        literal = _scalar(raw, values, text) if raw is not None else None
        if literal is not None:
            found[name] = literal
        else:
            found.pop(name, None)  # unknown here: say nothing on its account
    return found


class JobLiterals(NamedTuple):
    world_size: Optional[int]
    world_words: str  # how it was computed
    train_iters: Optional[int]
    train_iters_words: str


def job_literals(text: str, launch, values: dict) -> JobLiterals:
    """The ranks a launch starts (nproc per node x nodes) and its ``--train-iters``, where the
    script's literals say so."""
    words = [w.text for w in launch.command.words]
    index = [w.start for w in launch.command.words].index(launch.script.start) \
        if launch.script is not None else len(words)
    launcher = options(words[:index], values, text)
    script = options(words[index + 1:], values, text)
    world, world_words = None, ""
    nproc = next((launcher[o] for o in _NPROC if o in launcher), None)
    nnodes = next((launcher[o] for o in _NNODES if o in launcher), Literal("1", "not given"))
    if nproc is not None and nproc.value.isdigit() and nnodes.value.isdigit():
        world = int(nproc.value) * int(nnodes.value)
        world_words = f"--nproc_per_node {_said(nproc)} x --nnodes {_said(nnodes)}"
    iters = script.get("--train-iters")
    if iters is not None and iters.value.isdigit():
        return JobLiterals(world, world_words, int(iters.value), f"--train-iters {_said(iters)}")
    return JobLiterals(world, world_words, None, "")


def _said(literal: Literal) -> str:
    return f"{literal.value} ({literal.where})" if literal.where else literal.value
