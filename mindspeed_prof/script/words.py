"""How one shell word reads: its quotes, expansions and ``$(...)``/backtick substitutions.

Offsets are into the whole script, so ``scan`` and the editors can point into it. ``dequote``
gives a word's literal value with each expansion replaced by ``\\0`` (an unknown part).
"""

import re

_METACHARS = " \t\n;&|()<>"
ASSIGNMENT_HEAD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_EXPANSION = re.compile(rf'"?\$(?:\{{({_NAME})(?:\[[@*]\])?\}}|({_NAME}))"?')


class ScanError(ValueError):
    """The text is not a shell script this scanner can follow (unterminated quote, ...)."""


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def _skip_single(text, i):
    end = text.find("'", i + 1)
    if end < 0:
        raise ScanError(f"unterminated ' quote at line {line_of(text, i)}")
    return end + 1


def _skip_double(text, i):
    i += 1
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
        elif char == '"':
            return i + 1
        elif char == "$":
            i = _skip_dollar(text, i)
        elif char == "`":
            i = _skip_backtick(text, i)
        else:
            i += 1
    raise ScanError(f'unterminated " quote at line {line_of(text, i)}')


def _skip_backtick(text, i):
    i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "`":
            return i + 1
        else:
            i += 1
    raise ScanError(f"unterminated ` at line {line_of(text, i)}")


def skip_group(text, i, close):
    """From just inside an opening bracket to just past its ``close``, minding quotes/comments."""
    opening = {")": "(", "}": "{"}[close]
    depth = 1
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "'" and close == ")":
            i = _skip_single(text, i)
            continue
        if char == '"':
            i = _skip_double(text, i)
            continue
        if char == "`":
            i = _skip_backtick(text, i)
            continue
        if char == "$":
            i = _skip_dollar(text, i)
            continue
        if char == "#" and close == ")" and (i == 0 or text[i - 1] in " \t\n("):
            newline = text.find("\n", i)
            i = len(text) if newline < 0 else newline
            continue
        if char == opening:
            depth += 1
        elif char == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ScanError(f"unterminated {opening} at line {line_of(text, i)}")


def _skip_dollar(text, i):
    """Past ``$NAME``, ``${...}``, ``$(...)``, ``$((...))``, ``$'...'`` or a lone ``$``."""
    nxt = text[i + 1:i + 2]
    if nxt == "(":
        return skip_group(text, i + 2, ")")
    if nxt == "{":
        return skip_group(text, i + 2, "}")
    if nxt == "'":
        j = i + 2
        while j < len(text) and text[j] != "'":
            j += 2 if text[j] == "\\" else 1
        if j >= len(text):
            raise ScanError(f"unterminated $' quote at line {line_of(text, i)}")
        return j + 1
    if nxt == '"':
        return _skip_double(text, i + 1)
    match = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]").match(text, i + 1)
    return match.end() if match else i + 1


def read_word(text, i):
    start = i
    while i < len(text):
        char = text[i]
        if text.startswith("\r\n", i) or text.startswith("\\\r\n", i):
            break  # a CRLF line end, or a continuation before one
        if char == "\\":
            i += 2
        elif char == "'":
            i = _skip_single(text, i)
        elif char == '"':
            i = _skip_double(text, i)
        elif char == "`":
            i = _skip_backtick(text, i)
        elif char == "$":
            i = _skip_dollar(text, i)
        elif char == "(" and ASSIGNMENT_HEAD.fullmatch(text, start, i):
            i = skip_group(text, i + 1, ")")  # NAME=( ... ) array, comments allowed inside
        elif char in "<>" and text[i + 1:i + 2] == "(" and i == start:
            i = skip_group(text, i + 2, ")")  # process substitution
        elif char in _METACHARS:
            break
        else:
            i += 1
    return min(i, len(text))


def dequote(word):
    """The literal value of a word, each expansion replaced by ``\\0`` (an unknown part)."""
    out, i = [], 0
    while i < len(word):
        char = word[i]
        if char == "\\":
            out.append(word[i + 1:i + 2])
            i += 2
        elif char == "'":
            end = _skip_single(word, i)
            out.append(word[i + 1:end - 1])
            i = end
        elif char == '"':
            end = _skip_double(word, i)
            out.append(_dequote_double(word[i + 1:end - 1]))
            i = end
        elif char == "$" and word[i + 1:i + 2] == "'":
            end = _skip_dollar(word, i)
            out.append(word[i + 2:end - 1])
            i = end
        elif char in "$`":
            i = _expansion(word, i, out)
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _expansion(text, i, out):
    """Append the placeholder for the ``$``/backtick expansion at ``i``; return where it ends."""
    end = _skip_dollar(text, i) if text[i] == "$" else _skip_backtick(text, i)
    out.append("\0" if end > i + 1 else "$")  # a lone "$" is a literal dollar
    return end


def _dequote_double(inner):
    out, i = [], 0
    while i < len(inner):
        char = inner[i]
        if char == "\\" and inner[i + 1:i + 2] == "\n":
            i += 2  # a continuation inside double quotes vanishes, as in bash
        elif char == "\\" and inner[i + 1:i + 2] in ('"', "\\", "$", "`"):
            out.append(inner[i + 1])
            i += 2
        elif char in "$`":
            i = _expansion(inner, i, out)
        else:
            out.append(char)
            i += 1
    return "".join(out)


def substitutions(text, start, end):
    """The bodies ``(start, end)`` of the ``$(...)`` and backtick substitutions in one word."""
    found, i, double = [], start, False
    while i < end:
        char = text[i]
        if char == "\\":
            i += 2
        elif char == "'" and not double:
            i = _skip_single(text, i)
        elif char == '"':
            double, i = not double, i + 1
        elif char == "`" or (text.startswith("$(", i) and not text.startswith("$((", i)):
            stop = _skip_backtick(text, i) if char == "`" else _skip_dollar(text, i)
            found.append((i + (1 if char == "`" else 2), stop - 1))
            i = stop
        elif char == "$":
            i = _skip_dollar(text, i)
        else:
            i += 1
    return found


def quoted_span(text, start, end):
    """``(inner start, inner end, quote)`` when ``text[start:end]`` is one quoted string."""
    if end - start < 2 or text[start] not in "'\"":
        return None
    skip = _skip_single if text[start] == "'" else _skip_double
    return (start + 1, end - 1, text[start]) if skip(text, start) == end else None


def expansion_name(word):
    """NAME when ``word`` is only ``$NAME``, ``${NAME}`` or ``${NAME[@]}`` (quoted or not)."""
    match = _EXPANSION.fullmatch(word)
    if not match or word.startswith('"') != word.endswith('"'):
        return None
    return match.group(1) or match.group(2)
