"""What the readers print and how their processes are set up: JSON text the same as
``json.dumps(indent=2)`` writes it, and glibc's malloc told to keep freed blocks."""

import json
import math
import subprocess
import sys

import pytest

from mindspeed_prof.output import allocator
from mindspeed_prof.output.render import jsontext

VALUES = [
    {"a": 1.0, "b": [1e16, 1e-7, 123456789.123, -0.0, 5e-324, 1.7976931348623157e308],
     "c": {}, "d": [], "e": "h\u00e9llo\n\t\"\\/\x01", "f": None, "g": True,
     "h": [{"x": [[], {}]}], "i": "\ud83d\ude00", "j": 2**70, "": ""},
    [], {}, [[[]]],
    {"lone surrogate": "\ud800"},  # msgspec refuses it; json writes it escaped
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_json_text_is_what_json_dumps_with_indent_2_writes(value):
    assert jsontext.dumps(value) == json.dumps(value, indent=2)


def test_json_text_writes_nan_and_infinity_as_null_and_says_how_many():
    # JSON has no NaN: json.dumps would write NaN/Infinity, which jq and strict parsers refuse
    value = {"nan": math.nan, "inf": [math.inf, -math.inf]}
    assert jsontext.dumps(value) == json.dumps(
        {"nan": None, "inf": [None, None], jsontext.NON_FINITE_KEY: 3}, indent=2)


def test_json_text_takes_a_default_for_what_json_cannot_encode():
    value = {"when": object.__new__(type("Stamp", (), {"__str__": lambda self: "t0"}))}
    assert jsontext.dumps(value, default=str) == json.dumps(value, indent=2, default=str)


def test_the_reader_commands_set_the_malloc_thresholds_once():
    # in a fresh interpreter: glibc's mallopt is there (Linux CI), the second call is free
    code = ("from mindspeed_prof.output import allocator as a\n"
            "print(a.keep_freed_blocks(), a.keep_freed_blocks())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.split() == ["True", "True"], done.stderr
    assert allocator.MMAP_THRESHOLD_BYTES > 256 << 10  # above pyarrow's CSV blocks
