"""In-process restart entry point of Megatron-LM >= 0.13; the stand-in never restarts."""

from megatron.training import _harness, arguments

if _harness.VERSION < (0, 13):
    raise ImportError("megatron.training.inprocess_restart does not exist in Megatron-LM "
                      f"{_harness.VERSION_STRING}")


def maybe_wrap_for_inprocess_restart(pretrain):
    # Upstream parses the command line here, before pretrain, through the module attribute:
    # a plugin that wraps arguments.parse_args therefore sees one early, lenient call.
    args = arguments.parse_args(ignore_unknown_args=True)
    if args.inprocess_restart:
        raise NotImplementedError("--inprocess-restart is not emulated by the CPU stand-in")
    return pretrain, None
