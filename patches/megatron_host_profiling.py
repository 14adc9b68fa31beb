"""Megatron's own profiling options, met once mindspeed_prof owns ``--profile``.

Megatron-LM has two profilers behind ``--profile``: nsys (``cudaProfilerStart/Stop`` around the
window, NVTX ranges) and, with ``--use-pytorch-profiler``, its own ``torch.profiler``. Taking
``--profile`` over must not make an option of theirs vanish without a word:

* under an Nsight Systems session (``nsys profile``, which sets ``NSYS_PROFILING_SESSION_ID`` in
  the processes it profiles) the user asked for nsys's capture: Megatron's nsys path is left
  alone and mindspeed_prof records nothing, and says so;
* ``--use-pytorch-profiler`` is refused (two torch profilers cannot run in one thread);
* its 0.17+ options ``--pytorch-profiler-collect-shapes`` / ``-callstack`` become our
  ``--profile-record-shapes`` / ``--profile-with-stack``; ``--record-shapes`` (0.16+, shapes in
  the nsys NVTX ranges) becomes ``--profile-record-shapes`` too; ``-chakra`` (an execution trace
  we do not write) is refused with the fix; ``--nvtx-ranges`` (nsys only) is reported as unused.
* ``--record-memory-history`` / ``--memory-snapshot-path`` (Megatron's allocator history) are
  honoured through ``--profile-memory-snapshot/-oom`` under ``--profile``: one recorder of the
  allocator per process (``megatron_memory.py``).
"""

import os

from mindspeed_prof.errors import ConfigError

NSYS_SESSION_ENV = "NSYS_PROFILING_SESSION_ID"

# Megatron's flag -> (our knob, our flag): same meaning, recorded by our session instead.
TAKEN_OVER = {
    "pytorch_profiler_collect_shapes": ("profile_record_shapes", "--profile-record-shapes"),
    "pytorch_profiler_collect_callstack": ("profile_with_stack", "--profile-with-stack"),
    "record_shapes": ("profile_record_shapes", "--profile-record-shapes"),
}


def _flag(dest):
    return "--" + dest.replace("_", "-")


def under_nsys(environ=None) -> bool:
    """This process is profiled by an Nsight Systems session."""
    return bool((os.environ if environ is None else environ).get(NSYS_SESSION_ENV))


def nsys_message(args) -> str:
    ranks = list(getattr(args, "profile_ranks", None) or [])
    who = "every rank" if not ranks else "rank(s) " + ",".join(str(r) for r in ranks)
    return (f"an Nsight Systems session profiles this process ({NSYS_SESSION_ENV} is set): "
            f"Megatron's own --profile path is left to it (cudaProfilerStart/Stop around "
            f"iterations [{getattr(args, 'profile_step_start', '?')}, "
            f"{getattr(args, 'profile_step_end', '?')}) on {who}, as Megatron decides); "
            f"mindspeed_prof records nothing in this run. Run without nsys for mindspeed_prof's "
            f"trace.")


def use_pytorch_profiler_message() -> str:
    return ("--use-pytorch-profiler starts Megatron's own torch.profiler, which cannot run "
            "beside mindspeed_prof's (torch fails with 'Profiler is already enabled on this "
            "thread'); drop --use-pytorch-profiler: mindspeed_prof writes the trace "
            "(--pytorch-profiler-collect-shapes / -callstack are taken over as "
            "--profile-record-shapes / --profile-with-stack).")


def take_over_options(args, config):
    """``config`` with Megatron's profiler options folded in, and the notes saying so.

    Raises ConfigError for an option that cannot be honoured (Chakra execution traces)."""
    if getattr(args, "pytorch_profiler_collect_chakra", False):
        raise ConfigError("--pytorch-profiler-collect-chakra asks Megatron's torch.profiler for "
                          "a Chakra execution trace, which mindspeed_prof does not write; drop "
                          "it (mindspeed_prof writes the chrome trace of the window), or drop "
                          "--profile and use --use-pytorch-profiler to get Megatron's own.")
    changes, notes = {}, []
    for dest, (knob, ours) in TAKEN_OVER.items():
        if getattr(args, dest, False) is True:
            if not getattr(config, knob):
                changes[knob] = True
            notes.append(f"{_flag(dest)} is taken over as {ours} (mindspeed_prof owns "
                         f"--profile).")
    if getattr(args, "nvtx_ranges", False) is True:
        notes.append("--nvtx-ranges only marks Megatron's nsys capture, which mindspeed_prof "
                     "replaces; it adds nothing to this trace (run under nsys to use it).")
    return (config.replace(**changes) if changes else config), notes
