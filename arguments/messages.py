"""argparse's messages for bad command-line input, completed with what to do.

argparse names the token but rarely the fix ("invalid int value: 'abc'", "unrecognized
arguments: --profile-levl level1"). The CLI's commands and the training's parser (Megatron's, with
our flags added) both pass their errors through ``with_fix``.
"""

import difflib
import re

_VALUE = re.compile(r"^argument (\S+?)(?:/\S+)?: invalid (int|float) value: (.*)$")
_MISSING = re.compile(r"^argument (\S+?)(?:/\S+)?: expected (?:one|at least one) argument$")
_UNRECOGNIZED = "unrecognized arguments: "


def with_fix(message, parser, argv=(), help_hint="--help"):
    """``message`` (from ``parser.error``) with the fix; ``argv`` is the command line parsed."""
    match = _VALUE.match(message)
    if match:
        kind = "an integer" if match[2] == "int" else "a number"
        return f"argument {match[1]}: expected {kind}, got {match[3]}; fix the value of {match[1]}"
    match = _MISSING.match(message)
    if match:
        return f"argument {match[1]}: give a value after {match[1]}"
    if message.startswith(_UNRECOGNIZED):
        return unrecognized(parser, message[len(_UNRECOGNIZED):].split(), argv, help_hint)
    return message


def closest(name, options):
    """The one option ``name`` was most likely meant to be (a typo's fix), or None."""
    close = difflib.get_close_matches(str(name), [str(o) for o in options], n=1, cutoff=0.6)
    return close[0] if close else None


def unrecognized(parser, extras, argv=(), help_hint="--help"):
    """What to say about the first of ``extras``, the arguments ``parser`` did not take."""
    token = extras[0]
    name = token.split("=", 1)[0]
    options = {option: action for action in parser._actions for option in action.option_strings}
    if name.startswith("-"):
        close = closest(name, options)
        hint = f"did you mean {close}?" if close else f"see {help_hint} for the options"
        return f"unrecognized option {name!r}; {hint}"
    argv = list(argv)
    index = argv.index(token) if token in argv else -1
    switch = argv[index - 1] if index > 0 else None
    if switch in options and options[switch].nargs == 0:
        return (f"{switch} takes no value; drop {token!r} (give {switch} to turn it on, leave "
                f"it out for off)")
    return f"unexpected argument {token!r}; see {help_hint}"
