"""Just enough of bash's grammar to find simple commands in a launch script, with their offsets.

``scan(text)`` returns every simple command the shell would run (``Command``): its words and
redirections with their character offsets, and where its and-or list starts. Comments,
heredoc bodies and quoted strings stay inside words or are skipped, so a commented-out
``torchrun`` or an ``echo "torchrun ..."`` is never mistaken for a launch; each command keeps the
spans of its heredoc bodies (``Heredoc``), so a body fed to a shell can be scanned as the script
it is. Compound commands
(``if``/``case``/``for``/functions) are flattened: their bodies' simple commands are listed in
order, and so are those of a ``$(...)`` or backtick substitution, right after the command whose
word holds it. A CRLF line ending is a newline (its ``\r`` belongs to no word), so an edit can
keep it. This is a scanner for editing, not an interpreter: nothing is expanded.
"""

import re
from dataclasses import dataclass, field
from typing import List, Optional

from .words import ASSIGNMENT_HEAD, dequote, read_word, skip_group, substitutions
_BLANK = " \t"
_REDIR = re.compile(r"\d*(?:&>>|&>|>>|>&|>\||<<<|<<-|<<|<&|<>|>|<)")
_CONTROL = ("&&", "||", ";;&", ";;", ";&", "|&", "&", ";", "|", "(", ")")
# At command position these only open or close a compound command; what follows is a command.
_OPENERS = {"if", "then", "else", "elif", "while", "until", "do", "{"}
_CLOSERS = {"fi", "done", "}", "esac"}


@dataclass(frozen=True)
class Token:
    kind: str  # "word", "redir", "op" or "newline"
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Heredoc:
    """The body of one ``<<WORD`` redirection: ``text[start:end]``, up to its delimiter line."""
    operator: Token
    start: int
    end: int
    quoted: bool  # `<<'EOF'`/`<<"EOF"`/`<<\EOF`: the body is taken as written, nothing expands
    word: str  # the delimiter as written (`EOF`, `'EOF'`)


@dataclass
class Command:
    """One simple command: ``words`` are its arguments (assignments and wrappers included)."""
    words: list
    redirects: list = field(default_factory=list)  # (operator Token, target Token or None)
    list_start: int = 0  # offset where its and-or list (``a && b | c``) begins
    heredocs: list = field(default_factory=list)  # Heredoc for each `<<` among its redirects

# ---- tokens ------------------------------------------------------------------------------------

def tokenize(text, start=0, heredocs_found=None):
    """Tokens of ``text[start:]``; comments, line continuations and heredoc bodies are left out.

    ``heredocs_found``, when given, receives ``{operator start: Heredoc}`` for each body skipped.
    """
    tokens, heredocs, i = [], [], start
    while i < len(text):
        char = text[i]
        if char in _BLANK or text.startswith("\r\n", i):
            i += 1
        elif text.startswith("\\\n", i) or text.startswith("\\\r\n", i):
            i += 2 if text[i + 1] == "\n" else 3
        elif text.startswith("((", i):  # arithmetic command: its `<<` is a shift, not a heredoc
            end = skip_group(text, i + 1, ")")
            tokens.append(Token("word", text[i:end], i, end))
            i = end
        elif char == "#":
            newline = text.find("\n", i)
            i = len(text) if newline < 0 else newline
        elif char == "\n":
            tokens.append(Token("newline", "\n", i, i + 1))
            i += 1
            for operator, (delimiter, quoted, word), strip_tabs in heredocs:
                body_start, (body_end, i) = i, _skip_heredoc(text, i, delimiter, strip_tabs)
                if heredocs_found is not None:
                    heredocs_found[operator.start] = Heredoc(operator, body_start, body_end,
                                                             quoted, word)
            heredocs = []
        elif (match := _REDIR.match(text, i)) and text[match.end():match.end() + 1] != "(":
            tokens.append(Token("redir", match.group(), i, match.end()))
            i = match.end()
            if match.group().lstrip("0123456789") in ("<<", "<<-"):
                heredocs.append((tokens[-1], _heredoc_delimiter(text, i),
                                 match.group().endswith("-")))
        elif char in ";&|()":
            op = next(op for op in _CONTROL if text.startswith(op, i))
            tokens.append(Token("op", op, i, i + len(op)))
            i += len(op)
        else:
            end = read_word(text, i)
            tokens.append(Token("word", text[i:end], i, end))
            i = end
    return tokens


def _heredoc_delimiter(text, i):
    """``(delimiter, quoted, word)``: a quote or backslash in the word keeps the body unexpanded."""
    while i < len(text) and text[i] in _BLANK:
        i += 1
    word = text[i:read_word(text, i)]
    return dequote(word), any(char in word for char in "'\"\\"), word


def _skip_heredoc(text, i, delimiter, strip_tabs):
    """``(end of the body, offset past its delimiter line)``; an unended body runs to the end."""
    while i < len(text):
        newline = text.find("\n", i)
        end = len(text) if newline < 0 else newline
        line = text[i:end].removesuffix("\r")
        if (line.lstrip("\t") if strip_tabs else line) == delimiter:
            return i, min(end + 1, len(text))
        i = end + 1
    return len(text), len(text)


# ---- commands ----------------------------------------------------------------------------------

def scan(text: str, start: int = 0, end: Optional[int] = None) -> List[Command]:
    """Every simple command of ``text[start:end]`` in source order (a list of ``Command``).

    Offsets stay those of ``text``: the text is cut at ``end``, never shifted.
    """
    text, commands = text if end is None else text[:end], []
    for command in _scan(text, start):
        commands.append(command)
        for word in command.words + [target for _, target in command.redirects if target]:
            for body in substitutions(text, word.start, word.end):
                commands.extend(scan(text, *body))
    return commands


def _scan(text, start):
    commands, current = [], None
    list_start, joined = None, False
    case_depth, in_pattern = 0, False
    heredocs = {}
    tokens = tokenize(text, start, heredocs)
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if in_pattern:  # case patterns: skip up to the ')' that ends them
            if token.kind == "word" and token.text == "esac":
                case_depth, in_pattern = case_depth - 1, False
            elif token.kind == "op" and token.text == ")":
                in_pattern = False
            continue
        if token.kind in ("op", "newline"):
            if current is not None:
                commands.append(current)
                current = None
            if token.text in ("&&", "||", "|", "|&"):
                joined = True
                continue
            if token.kind == "newline" and joined:
                continue  # `a &&` newline `b`: still one and-or list
            joined, list_start = False, None
            if token.text in (";;", ";&", ";;&") and case_depth:
                in_pattern = True
            continue
        if current is None and token.kind == "word":
            if token.text in _OPENERS or token.text in _CLOSERS:  # `a && { b; }` too
                if token.text == "esac":
                    case_depth = max(case_depth - 1, 0)
                continue
            if token.text == "!" and list_start is None and not joined:
                list_start = token.start
                continue
        if current is None:
            start = token.start if list_start is None else list_start
            current = Command(words=[], list_start=start)
            if not joined and list_start is None:
                list_start = token.start
            joined = False
        if token.kind == "redir":
            target = tokens[index] if index < len(tokens) and tokens[index].kind == "word" else None
            current.redirects.append((token, target))
            if token.start in heredocs:
                current.heredocs.append(heredocs[token.start])
            index += target is not None
            continue
        current.words.append(token)
        texts = [word.text for word in current.words]
        if texts[0] == "case" and len(texts) == 3 and texts[2] == "in":
            commands.append(current)
            current, case_depth, in_pattern = None, case_depth + 1, True
            joined, list_start = False, None
    if current is not None:
        commands.append(current)
    return [command for command in commands if command.words]


# ---- variables ---------------------------------------------------------------------------------

DECLARERS = {"export", "declare", "typeset", "local", "readonly"}


def assignments(commands):
    """``{NAME: [(word Token, value words)]}`` for each ``NAME=value`` statement of the script.

    Value words are what an unquoted expansion would split into (``\\0`` marks an unknown part).
    ``NAME=x cmd`` is left out: it sets NAME for ``cmd`` alone.
    """
    found = {}
    for command in commands:
        words = command.words
        if words[0].text in DECLARERS:  # `export NAME=x`, `local -a NAME=(...)`
            words = [w for w in words[1:] if not w.text.startswith("-")]
        if not words or not all(ASSIGNMENT_HEAD.match(w.text) for w in words):
            continue
        for word in words:
            head = ASSIGNMENT_HEAD.match(word.text)
            name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", word.text).group()
            value = word.text[head.end():]
            if value.startswith("(") and value.endswith(")"):
                values = [dequote(t.text) for t in tokenize(value[1:-1]) if t.kind == "word"]
            else:
                values = dequote(value).split()
            found.setdefault(name, []).append((word, values))
    return found
