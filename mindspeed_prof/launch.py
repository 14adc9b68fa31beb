"""``python -m mindspeed_prof.launch SCRIPT ARGS...``: run a training script with the patches armed.

Works under torchrun too (``torchrun --nproc-per-node 8 -m mindspeed_prof.launch pretrain_gpt.py
ARGS...``). SCRIPT runs as ``__main__`` with ``sys.argv = [SCRIPT, *ARGS]`` and its directory first
on ``sys.path``, exactly as ``python SCRIPT ARGS...`` would run it.
"""

import os
import runpy
import sys

USAGE = ("usage: python -m mindspeed_prof.launch SCRIPT.py [ARGS...]\n"
         "       torchrun [torchrun options] -m mindspeed_prof.launch SCRIPT.py [ARGS...]\n"
         "Runs SCRIPT with mindspeed_prof's Megatron/MindSpeed patches armed when ARGS contain "
         "--profile* flags.")


def _script_first(argv):
    """``python -m torch.distributed.launch`` (without --use-env) puts ``--local-rank=N`` before
    the script; the script expects it among its own arguments, as ``python SCRIPT`` would see it."""
    leading = []
    while argv and argv[0].startswith(("--local-rank", "--local_rank")):
        token = argv.pop(0)
        leading.append(token)
        if "=" not in token and argv:
            leading.append(argv.pop(0))
    return argv[:1] + leading + argv[1:]


def main(argv=None):
    argv = _script_first(list(sys.argv[1:] if argv is None else argv))
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    script, script_args = argv[0], argv[1:]
    if not os.path.isfile(script):
        print(f"mindspeed_prof.launch: error: training script {script!r} not found; give the path "
              f"of the entry script (e.g. pretrain_gpt.py) as the first argument.", file=sys.stderr)
        return 2
    from mindspeed_prof.recording.exits import exit_reason, note_process_outcome
    from mindspeed_prof.patches import activate

    sys.argv = [script] + script_args
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    activate(script_args, by="launcher")
    try:
        runpy.run_path(script, run_name="__main__")
    except BaseException as exc:
        # A flush at interpreter exit (a server's, a role's) then records how the script ended.
        note_process_outcome(*exit_reason(type(exc), exc))
        raise
    note_process_outcome("finished", None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
