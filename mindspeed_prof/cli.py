"""``mindspeed-prof``: the command-line entry point.

Each sub-command lives in ``mindspeed_prof/commands/<name>.py`` and provides ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``. Usage errors (``ConfigError``) become exit
code 2 with one clear line; nothing here prints a traceback for bad input.
"""

import argparse
import difflib
import importlib
import re
import sys

from .errors import ConfigError
from .version import __version__

COMMANDS = ("show-config", "adapt-script", "check", "summary", "analyse", "trigger")


def _module(command):
    return importlib.import_module(f"mindspeed_prof.commands.{command.replace('-', '_')}")


class _CommandParser(argparse.ArgumentParser):
    """argparse's own messages for a bad value, completed with what to do."""

    _PATTERNS = (
        (re.compile(r"^argument (\S+): invalid (int|float) value: (.*)$"),
         lambda m: f"argument {m[1]}: expected {'an integer' if m[2] == 'int' else 'a number'}, "
                   f"got {m[3]}; fix the value of {m[1]}"),
        (re.compile(r"^argument (\S+): expected (one|at least one) argument$"),
         lambda m: f"argument {m[1]}: give a value after {m[1]}"),
    )

    def error(self, message):
        for pattern, rewrite in self._PATTERNS:
            match = pattern.match(message)
            if match:
                message = rewrite(match)
                break
        super().error(message)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="mindspeed-prof",
        description="Profile Megatron-LM / MindSpeed training from --profile* flags, then check "
                    "and summarise the output.")
    parser.add_argument("--version", action="version", version=f"mindspeed-prof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    for command in COMMANDS:
        try:
            module = _module(command)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("mindspeed_prof.commands."):
                continue  # a command not built yet in this checkout
            raise
        child = sub.add_parser(command, help=module.HELP, description=module.HELP,
                               allow_abbrev=False)
        module.add_arguments(child)
        child.set_defaults(_run=module.run, _parser=child)
    return parser


def _unrecognized(child, command, extras, argv):
    """What to say about the first argument ``command``'s parser did not take."""
    token = extras[0]
    name = token.split("=", 1)[0]
    options = {option: action for action in child._actions for option in action.option_strings}
    if name.startswith("-"):
        close = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
        hint = (f"did you mean {close[0]}?" if close
                else f"see `mindspeed-prof {command} --help` for its options")
        return f"unrecognized option {name!r}; {hint}"
    index = argv.index(token) if token in argv else -1
    switch = argv[index - 1] if index > 0 else None
    if switch in options and options[switch].nargs == 0:
        return (f"{switch} takes no value; drop {token!r} (give {switch} to turn it on, leave "
                f"it out for off)")
    return f"unexpected argument {token!r}; see `mindspeed-prof {command} --help`"


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    if extras:
        # argparse would name the token only ("unrecognized arguments: --profile-step-strat 3").
        message = _unrecognized(args._parser, args.command, extras, argv)
        print(f"mindspeed-prof {args.command}: error: {message}", file=sys.stderr)
        return 2
    try:
        return int(args._run(args) or 0)
    except ConfigError as exc:
        print(f"mindspeed-prof {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"mindspeed-prof {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
