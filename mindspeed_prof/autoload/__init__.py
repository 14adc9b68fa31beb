"""Imported by the installed ``mindspeed_prof_autoload.pth`` when a command line carries --profile.

The ``.pth`` line only does a substring test on the command line, so every other Python process
pays nothing but that test. ``MINDSPEED_PROF_AUTOLOAD=0`` turns the hook off. Launchers whose own
command line carries the training flags (torchrun's agent, ``python -m torch.distributed.run``,
our own CLI) are left alone: the training processes they start load the hook themselves.
"""

import os
import sys

LAUNCHER_PROGRAMS = ("torchrun", "mindspeed-prof")
LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch", "mindspeed_prof.cli")


def is_launcher(orig_argv):
    program = os.path.basename(orig_argv[1]) if len(orig_argv) > 1 else ""
    if program in LAUNCHER_PROGRAMS:
        return True
    for flag, module in zip(orig_argv, orig_argv[1:]):
        if flag == "-m":
            return module in LAUNCHER_MODULES
    return False


_ORIG_ARGV = list(getattr(sys, "orig_argv", sys.argv))
if os.environ.get("MINDSPEED_PROF_AUTOLOAD", "1") != "0" and not is_launcher(_ORIG_ARGV):
    from mindspeed_prof.patches import activate

    activate(_ORIG_ARGV[1:], by="autoload")
