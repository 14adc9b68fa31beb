"""What a knob's values look like: one object per type of ``--profile*`` knob.

Every knob of ``ProfilerConfig`` has a ``Kind`` (a bool switch, an integer, a rank list...). The
kind is the one place that knows, for values of its type, what a value may be (``fits``: the
config's check, also used on YAML values), how to say what is expected (``describe``), how the
flag is declared on a command line (``argparse_kwargs``), and how an environment variable's text
becomes a value (``from_env``). Before, these lived in five tables in three files
(``config._check_kind``, ``describe_kind``, ``flags._argparse_kwargs`` + ``_METAVARS``,
``yaml_file._value_fits``, ``env_values``) and drifted: ``profile_steps: 4`` was accepted by one
table and refused by the next.

Kinds check only the *type*; what a value means (a level name, a rank grammar) is checked by the
normaliser that ``ProfilerConfig.__post_init__`` applies afterwards, which names the fix.
"""

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence

import yaml

from ..errors import ConfigError


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _items_fit(value: Any) -> bool:
    """A list knob's value: one token or a list/tuple of tokens (names, numbers, ranges)."""
    items = value if isinstance(value, (list, tuple)) else [value]
    return all(isinstance(item, (str, int, range)) and not isinstance(item, bool) for item in items)


def _ranges_fit(value: Any) -> bool:
    """``profile_steps``: tokens as for a list, or the config's own ``((first, last), ...)``."""
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(item, (list, tuple)) and len(item) == 2 and all(map(_is_int, item))
            for item in value):
        return True
    return _items_fit(value)


def _yaml_scalar(text: str) -> Any:
    """An environment variable's text as the YAML scalar it spells (``5``, ``true``, ``[0, 1]``)."""
    if not text.strip():
        return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


@dataclass(frozen=True)
class Kind:
    """The type of a knob's values; see the module docstring."""

    name: str
    fits: Callable[[Any], bool]
    expected: str                       # what describe() says
    with_choices: Optional[str] = None  # ... when the knob lists its choices ("one of {choices}")
    metavar: Optional[str] = None       # for --help; choices override it
    optional: bool = False              # None is a value ("not set") wherever it comes from
    many: bool = False                  # a list: nargs="+" on a command line
    raw_env: bool = False               # an env value is taken as typed (paths, names)

    def accepts(self, value: Any, *, none_is_default: bool = False) -> bool:
        """Whether ``value`` is of this kind. ``none_is_default``: a Python caller's None means
        "not given" for a list knob too (``ProfilerConfig(profile_steps=None)``); in a YAML file
        or the environment an empty list value is a mistake, refused here or by the normaliser."""
        none_ok = self.optional or (none_is_default and self.many)
        return (none_ok and value is None) or self.fits(value)

    def check(self, flag: str, value: Any, choices: Optional[Sequence[str]] = None, *,
              none_is_default: bool = False) -> None:
        """ConfigError unless ``value`` is of this kind (``flag`` names it in the message)."""
        if not self.accepts(value, none_is_default=none_is_default):
            raise ConfigError(f"{flag} {value!r} has the wrong type: expected "
                              f"{self.describe(choices)}.")
        if self is FLOAT and value is not None and not math.isfinite(value):
            # nan compares false with every bound, so it would slip past the range checks and,
            # for --profile-max-gb, silently switch the budget off.
            raise ConfigError(f"{flag} {value} is not a finite number; give a number such as 10, "
                              f"or leave {flag} out.")

    def describe(self, choices: Optional[Sequence[str]] = None) -> str:
        if choices and self.with_choices:
            return self.with_choices.format(choices=", ".join(choices))
        return self.expected

    def argparse_kwargs(self, flag: str, default: Any, help_text: str,
                        choices: Optional[Sequence[str]] = None,
                        shown_default: Any = None) -> Dict[str, Any]:
        """How ``flag`` is declared on a parser that lacks it (a host's own definition wins)."""
        expects = f"(default: {shown_default if shown_default is not None else default}; " \
                  f"expects {self.describe(choices)})"
        if self is BOOL:
            return {"action": "store_true", "help": help_text}
        kwargs: Dict[str, Any] = {"default": default, "metavar": self.metavar,
                                  "help": f"{help_text} {expects}"}
        if self.many:
            # The default stays the config's own tuple: an empty list is what a user typed (an
            # unset variable) and is refused, while () means "not given".
            kwargs.update(nargs="+", type=str)
        elif self is INT:
            kwargs["type"] = _typed(flag, int, "an integer such as 5")
        elif self is FLOAT:
            kwargs["type"] = _typed(flag, float, "a number such as 10")
        else:
            kwargs["type"] = str
        if choices and not self.many:
            kwargs["metavar"] = "{" + ",".join(choices) + "}"
        return kwargs

    def from_env(self, text: str) -> Any:
        """The value ``MINDSPEED_PROF_<NAME>=text`` sets."""
        if self.raw_env:
            return text  # a path or name must not be re-typed by YAML (e.g. "1e3", "no")
        if self is BOOL and text.strip() in ("0", "1"):
            return text.strip() == "1"  # MINDSPEED_PROF_HTTP_ALLOW_REMOTE=1, as shells write it
        value = _yaml_scalar(text)
        if self.many and value is None:
            return text  # an empty $RANKS: refused as a list naming nothing, not as a type
        return value


def _typed(flag: str, convert: Callable[[str], Any], example: str) -> Callable[[str], Any]:
    import argparse

    def parse(text: str) -> Any:
        try:
            return convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {example}, got {text!r}; fix the value of {flag}") from None
    parse.__name__ = convert.__name__
    return parse


BOOL = Kind("bool", lambda v: isinstance(v, bool), "true or false")
INT = Kind("int", _is_int, "an integer", metavar="N")
FLOAT = Kind("float?", _is_number, "a number", metavar="N", optional=True)
TEXT = Kind("str", lambda v: isinstance(v, str), "a string", metavar="DIR", raw_env=True)
PATH = Kind("path", lambda v: isinstance(v, str), "a file path", metavar="FILE", optional=True,
            raw_env=True)
# A secret (the HTTP routes' token): a string taken as typed, never shown.
SECRET = Kind("secret", lambda v: isinstance(v, str), "a string", metavar="TOKEN", optional=True,
              raw_env=True)
# A name (a level); ``text,db`` lists are one string. Checked against the choices later, in
# every spelling, by the config's normaliser.
CHOICE = Kind("choice", lambda v: isinstance(v, (str, list, tuple)), "a name", "one of {choices}",
              raw_env=True)
OPTIONAL_CHOICE = Kind("choice?", lambda v: isinstance(v, str), "a name", "one of {choices}",
                       optional=True, raw_env=True)
RANKS = Kind("ranks", _items_fit, "a rank list such as 0,1 (or 0 1), '0-7' or -1",
             metavar="RANK", many=True)
NAMES = Kind("list", _items_fit, "a list", "a list drawn from {choices}", metavar="NAME",
             many=True)
STEPS = Kind("steps", _ranges_fit, "iteration ranges such as 100-102,1100-1102 (or 7 for one)",
             metavar="A-B", many=True)
FORWARDS = Kind("forwards", _ranges_fit, "one range of forwards such as 2-5 (or 3 for one)",
                metavar="A-B", many=True)
