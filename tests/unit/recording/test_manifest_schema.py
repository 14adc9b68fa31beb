"""The manifest's schema is one table (mindspeed_prof/manifest_schema.py): every key the recorder
writes is in it, and the readers judge a manifest by its types."""

import ast
import json
import os

from mindspeed_prof import manifest_schema
from mindspeed_prof.output.read.manifest_shape import shape_problem

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RECORDING = os.path.join(REPO, "mindspeed_prof", "recording")


def written_keys(path, owner=None):
    """String keys stored into a ``data`` dict (``x.data["k"] = ...``, ``data["k"] = ...``,
    ``data.setdefault("k", ...)``, ``data = {...}``), inside class ``owner`` when given."""
    tree = ast.parse(open(path).read())
    if owner:
        tree = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner)
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.slice, ast.Constant):
            keys.add(node.slice.value)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "setdefault" \
                and node.args and isinstance(node.args[0], ast.Constant):
            keys.add(node.args[0].value)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) \
                and any(getattr(t, "attr", getattr(t, "id", "")) == "data" for t in node.targets):
            keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    return keys


def literal_keys(path, function):
    tree = ast.parse(open(path).read())
    body = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    dicts = [n for n in ast.walk(body) if isinstance(n, ast.Dict)]
    return {k.value for d in dicts for k in d.keys if isinstance(k, ast.Constant)}


def test_every_key_the_recorder_writes_at_the_top_of_a_manifest_is_in_the_schema():
    keys = written_keys(os.path.join(RECORDING, "manifest.py"), "Manifest")
    assert {"status", "exit", "rank", "run_id_source"} <= keys  # the scan sees the writer
    assert keys - set(manifest_schema.FIELDS) == set()


def test_every_key_of_a_window_and_a_planned_window_is_in_the_schema():
    entries = os.path.join(RECORDING, "manifest_entries.py")
    manifest = os.path.join(RECORDING, "manifest.py")
    window = written_keys(entries, "WindowEntry") | literal_keys(manifest, "add_window")
    planned = (written_keys(entries, "PlannedWindow") | literal_keys(manifest, "add_planned")
               | {"recorded_elsewhere"})
    assert {"cut", "iterations_recorded", "started_by"} <= window
    assert window - set(manifest_schema.WINDOW_FIELDS) == set()
    assert planned - set(manifest_schema.PLANNED_FIELDS) == set()


def test_the_reader_refuses_a_field_of_the_schema_holding_another_type():
    # first_iteration was the writer's alone before the schema was one table
    assert shape_problem(json.loads('{"rank": 0, "first_iteration": "five"}')) == \
        "first_iteration is 'five' (a whole number or null expected)"
    assert shape_problem({"rank": 0, "first_iteration": 5, "status": "complete"}) is None
