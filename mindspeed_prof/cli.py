"""``mindspeed-prof``: the command-line entry point.

Each sub-command lives in ``mindspeed_prof/commands/<name>.py`` and provides ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``. Usage errors (``ConfigError``) become exit
code 2 with one clear line; nothing here prints a traceback for bad input.
"""

import argparse
import importlib
import os
import sys

from .errors import ConfigError
from .version import __version__

COMMANDS = ("show-config", "adapt-script", "check", "summary", "merge", "memory", "analyse",
            "trigger", "timeline", "diff", "report", "pipeline", "whatif", "export")


def _module(command):
    return importlib.import_module(f"mindspeed_prof.commands.{command.replace('-', '_')}")


class _CommandParser(argparse.ArgumentParser):
    """argparse's own messages for a bad value, completed with what to do."""

    def error(self, message):
        from .arguments.messages import with_fix

        super().error(with_fix(message, self, help_hint=f"`{self.prog} --help`"))


def _named_command(argv):
    """The sub-command argv names, if any: the first token that is not an option."""
    for token in argv:
        if not token.startswith("-"):
            return token if token in COMMANDS else None
    return None


def build_parser(only=None):
    """The parser; with ``only``, just that sub-command's (each command module imports what it
    needs, e.g. pyarrow for check: a run should not pay for the others' imports)."""
    parser = argparse.ArgumentParser(
        prog="mindspeed-prof",
        description="Profile Megatron-LM / MindSpeed training from --profile* flags, then check "
                    "and summarise the output.")
    parser.add_argument("--version", action="version", version=f"mindspeed-prof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    for command in (only,) if only else COMMANDS:
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


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=_named_command(argv))
    args, extras = parser.parse_known_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    if extras:
        # argparse would name the token only ("unrecognized arguments: --profile-step-strat 3").
        from .arguments.messages import unrecognized

        message = unrecognized(args._parser, extras, argv,
                               help_hint=f"`mindspeed-prof {args.command} --help`")
        print(f"mindspeed-prof {args.command}: error: {message}", file=sys.stderr)
        return 2
    try:
        return int(args._run(args) or 0)
    except ConfigError as exc:
        from .output.render.safe import lines  # every command's one line, whatever it quotes

        print(lines(f"mindspeed-prof {args.command}: error: {exc}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"mindspeed-prof {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `mindspeed-prof summary DIR | head`: the reader left; say nothing, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
