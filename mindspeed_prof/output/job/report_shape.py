"""Whether a node report (``check --node I/N --report``) has the shape ``merge`` reads.

A report is JSON from another machine, or a file edited or cut by hand: a field of another type
(``directory: 5``, ``node: "x"``, ``expected_ranks: 5``, ``summary.top: "ten"``) or a missing
section would otherwise surface mid-merge as a traceback. Every field ``merge`` and its
renderings use is checked here first, so a bad report is one line naming the file and the
field, and exit 2 (a usage error: the file given is no node report).
"""

import math
from typing import Any, List, Optional

from ..check.report import VERDICTS

NONE = type(None)
NUMBER = (int, float)


class Malformed(Exception):
    """Where (a dotted path) the report differs from the shape, and how."""


def _name(types: tuple) -> str:
    words = {str: "a string", int: "a whole number", float: "a number", list: "a list",
             dict: "an object", bool: "true or false", NONE: "null"}
    return " or ".join(dict.fromkeys(words.get(t, t.__name__) for t in types))


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


def _is(value: Any, types: tuple) -> bool:
    if type(value) is bool:
        return bool in types
    return isinstance(value, types)


def _need(data: dict, key: str, types: tuple, where: str) -> Any:
    if key not in data:
        raise Malformed(f"{where}{key} is missing")
    value = data[key]
    if not _is(value, types):
        raise Malformed(f"{where}{key} is {_show(value)}, {_name(types)} expected")
    return value


def _items(data: dict, key: str, types: tuple, where: str, optional: bool = False) -> List[Any]:
    """``data[key]``, a list whose items are of ``types``."""
    if optional and data.get(key) is None:
        return []
    values = _need(data, key, (list,), where)
    for index, value in enumerate(values):
        if not _is(value, types):
            raise Malformed(f"{where}{key}[{index}] is {_show(value)}, {_name(types)} expected")
    return values


def _rank(value: Any, where: str) -> None:
    if value < 0:
        raise Malformed(f"{where} is {_show(value)}, not a rank")


def _verdict(data: dict, where: str) -> None:
    verdict = _need(data, "verdict", (str,), where)
    if verdict not in VERDICTS:
        raise Malformed(f"{where}verdict is {_show(verdict)}, one of {', '.join(VERDICTS)} "
                        f"expected")


def _file(data: dict, where: str) -> None:
    _need(data, "name", (str,), where)
    _need(data, "status", (str,), where)
    for key, types in (("size", (int, NONE)), ("detail", (str, NONE)),
                       ("expected_because", (str, NONE))):
        if key in data:
            _need(data, key, types, where)


def _run(data: dict, where: str) -> None:
    for key, types in (("path", (str,)), ("backend", (str,)), ("rank", (int, NONE)),
                       ("rank_source", (str, NONE)), ("timestamp", (str, NONE)),
                       ("settings", (str, NONE)), ("error_count", (int,))):
        _need(data, key, types, where)
    _verdict(data, where)
    _items(data, "steps", (int,), where)
    for key in ("problems", "warnings", "errors"):
        _items(data, key, (str,), where)
    if data.get("trigger") is not None:
        _need(data, "trigger", (str,), where)
    window = data.get("window")
    if window is not None and not (isinstance(window, list) and len(window) == 2
                                   and all(type(n) is int for n in window)):
        raise Malformed(f"{where}window is {_show(window)}, [start, end] expected")
    for index, item in enumerate(_items(data, "files", (dict,), where)):
        _file(item, f"{where}files[{index}].")


def _rank_report(data: dict, where: str) -> None:
    _rank(_need(data, "rank", (int,), where), f"{where}rank")
    _verdict(data, where)
    for key in ("manifest", "manifest_status", "msprof_analyze_pick"):
        _need(data, key, (str, NONE), where)
    for key in ("problems", "warnings", "errors"):
        _items(data, key, (str,), where)
    _items(data, "notes", (str,), where, optional=True)
    for index, item in enumerate(_items(data, "runs", (dict,), where)):
        _run(item, f"{where}runs[{index}].")


def _check(data: dict) -> None:
    where = "check."
    _need(data, "directory", (str,), where)
    for rank in _items(data, "expected_ranks", (int,), where):
        _rank(rank, f"{where}expected_ranks")
    for index, item in enumerate(_items(data, "ranks", (dict,), where)):
        _rank_report(item, f"{where}ranks[{index}].")
    for index, item in enumerate(_items(data, "unranked", (dict,), where)):
        _run(item, f"{where}unranked[{index}].")
    _items(data, "warnings", (str,), where)
    if data.get("run") is not None:
        _need(data, "run", (str,), where)


def _rank_summary(data: dict, where: str) -> None:
    _rank(_need(data, "rank", (int,), where), f"{where}rank")
    for key in ("backend", "op_types_source"):
        _need(data, key, (str, NONE), where)
    if data.get("basis") is not None:
        _need(data, "basis", (str,), where)
    for key in ("sources", "notes"):
        _items(data, key, (str,), where)
    _items(data, "requests", (dict,), where)
    for index, step in enumerate(_items(data, "steps", (dict,), where)):
        at = f"{where}steps[{index}]."
        _need(step, "step", (int, NONE), at)
        for key, value in step.items():
            if key != "step" and not _is(value, (*NUMBER, NONE)):
                raise Malformed(f"{at}{key} is {_show(value)}, a number expected")
    for index, item in enumerate(data.get("collectives") and _items(data, "collectives",
                                                                  (list,), where) or []):
        if len(item) != 6 or not _is(item[0], (int,)) or not _is(item[1], (str,)) \
                or not _is(item[2], (str,)) or not _is(item[3], (*NUMBER, NONE)) \
                or not _is(item[4], NUMBER) or not _is(item[5], NUMBER):
            raise Malformed(f"{where}collectives[{index}] is {_show(item)}, [step, name, "
                            f"group, bytes, start_us, end_us] expected")
    for index, item in enumerate(data.get("spans") and _items(data, "spans", (list,), where)
                                 or []):
        if len(item) != 3 or not _is(item[0], (int,)) or not _is(item[1], NUMBER) \
                or not _is(item[2], NUMBER):
            raise Malformed(f"{where}spans[{index}] is {_show(item)}, [step, start_us, end_us] "
                            f"expected")
    for key in ("kernels", "op_types", "ops"):
        for index, item in enumerate(_items(data, key, (list,), where)):
            at = f"{where}{key}[{index}]"
            if len(item) != 5 or not _is(item[0], (list, str)) or not _is(item[1], (str,)) \
                    or not _is(item[2], (str, NONE)) or not _is(item[3], NUMBER) \
                    or not _is(item[4], (int,)):
                raise Malformed(f"{at} is {_show(item)}, [key, name, type, total_us, count] "
                                f"expected")


def _summary(data: dict) -> None:
    where = "summary."
    _need(data, "directory", (str,), where)
    top = _need(data, "top", (int,), where)
    if top < 1:
        raise Malformed(f"{where}top is {top}, at least 1 expected")
    _items(data, "notes", (str,), where)
    for index, item in enumerate(_items(data, "ranks", (dict,), where)):
        _rank_summary(item, f"{where}ranks[{index}].")
    if data.get("places") is not None:  # each rank's layout and host (output/waits)
        for rank, place in _need(data, "places", (dict,), where).items():
            at = f"{where}places.{rank}."
            if not rank.isdigit() or not _is(place, (dict,)):
                raise Malformed(f"{where}places has {_show(rank)}: {_show(place)}, a rank and "
                                f"its parallel layout and host expected")
            _need(place, "parallel", (dict, NONE), at)
            _need(place, "hostname", (str, NONE), at)
    _links(data, where)


def _links(data: dict, where: str) -> None:
    """Each capture's communication_matrix.json as read (read/commmatrix.py)."""
    for index, item in enumerate(data.get("links") and _items(data, "links", (list,), where)
                                 or []):
        at = f"{where}links[{index}]"
        if len(item) != 3 or not _is(item[0], (int,)) or not _is(item[1], (str,)) \
                or not _is(item[2], (dict,)):
            raise Malformed(f"{at} is {_show(item)}, [rank, capture, read] expected")
        read = item[2]
        _need(read, "source", (str, NONE), f"{at}[2].")
        _need(read, "unreadable", (int,), f"{at}[2].")
        if "error" in read:
            _need(read, "error", (str,), f"{at}[2].")
        for number, row in enumerate(_items(read, "rows", (list,), f"{at}[2].")):
            if len(row) != 8 or not all(_is(v, t) for v, t in zip(row, (
                    (str,), (int,), (int,), (str,), (int,), NUMBER, NUMBER, (int,)))) \
                    or not all(math.isfinite(v) and v >= 0 for v in row[5:7]):
                raise Malformed(f"{at}[2].rows[{number}] is {_show(row)}, [group, src, dst, "
                                f"transport, size class, bytes, transit_us, transfers] "
                                f"expected")


def shape_problem(data: dict) -> Optional[str]:
    """Where ``data`` (a node report's JSON object) is not shaped as ``node_report`` writes it,
    or None."""
    try:
        _need(data, "directory", (str,), "")
        node = _need(data, "node", (dict, NONE), "")
        if node is not None:
            for key in ("index", "count"):
                if type(node.get(key)) is not int or node[key] < 0:
                    raise Malformed(f"node.{key} is {_show(node.get(key))}, a whole number "
                                    f"expected")
        for rank in _items(data, "covered_ranks", (int,), "", optional=True):
            _rank(rank, "covered_ranks")
        _check(_need(data, "check", (dict,), ""))
        _summary(_need(data, "summary", (dict,), ""))
    except Malformed as exc:
        return str(exc)
    return None
