"""The profiler call a config turns into, as text (``mindspeed-prof show-config``).

Built from the same helpers the backends call, so what is shown is what would run. Works without
torch_npu: the torch_npu call is then shown by name, and version-dependent dropping is noted.
"""

from .. import layout
from . import npu_options

_CONSTANTS = {"ProfilerLevel": {"level_none": "Level_none", "level0": "Level0",
                                "level1": "Level1", "level2": "Level2"}}


class _Names:
    """Stands in for torch_npu.profiler when it is not importable: attributes render as names."""

    def __init__(self, prefix=""):
        self._prefix = prefix

    def __getattr__(self, name):
        return _Names(f"{self._prefix}.{name}" if self._prefix else name)

    def __repr__(self):
        return self._prefix

    def __call__(self, *args, **kwargs):  # only reached for _ExperimentalConfig/profile
        return _Call(self._prefix, kwargs)


class _Call:
    def __init__(self, name, kwargs):
        self.name, self.kwargs = name, kwargs

    def __repr__(self):
        inner = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{self.name}({inner})"


def _torch_npu_profiler():
    try:
        import torch_npu.profiler as tp  # noqa: F401
        return tp, True
    except Exception:  # noqa: BLE001 - describe by name instead
        return _Names("torch_npu.profiler"), False


def npu_call(config, schedule, save_path, rank, worker=None):
    tp, real = _torch_npu_profiler()
    exp_kwargs, dropped = npu_options.experimental_kwargs(config, tp)
    experimental = _Call("_ExperimentalConfig", exp_kwargs)
    sched = (f"schedule(wait={schedule.wait}, active={schedule.active}, warmup={schedule.warmup}, "
             f"repeat={schedule.repeat}, skip_first={schedule.skip_first})")
    handler = (f"tensorboard_trace_handler({save_path!r}, worker_name={worker or layout.worker_name(rank)!r}, "
               f"analyse_flag={config.profile_analyse != 'offline'}, "
               f"async_mode={config.profile_analyse == 'async'})")
    kwargs = npu_options.profile_kwargs(config, tp if real else _Names("torch_npu.profiler"),
                                        experimental, _Raw(sched), _Raw(handler))
    text = repr(_Call("torch_npu.profiler.profile", kwargs))
    notes = [f"dropped (this torch_npu lacks it): {flag}" for flag in dropped]
    if npu_options.step_ids_note(config):
        notes.append(npu_options.step_ids_note(config))
    if not real:
        notes.append("torch_npu is not importable here: keywords a given torch_npu lacks are "
                     "dropped at run time with a warning naming the flag")
    return text, notes


def torch_call(config, schedule, save_path, rank, worker=None):
    sched = (f"torch.profiler.schedule(wait={schedule.wait}, warmup={schedule.warmup}, "
             f"active={schedule.active}, repeat={schedule.repeat}, skip_first={schedule.skip_first})")
    export = "a background thread" if config.profile_analyse != "sync" else "the training thread"
    trace = layout.TORCH_TRACE_TEMPLATE.format(rank=rank, time_ns="<time_ns>")
    return (f"torch.profiler.profile(activities=[CPU(, CUDA on a GPU)], schedule={sched}, "
            f"record_shapes={config.profile_record_shapes}, "
            f"profile_memory={config.profile_with_memory}, with_stack={config.profile_with_stack}, "
            f"with_flops={config.profile_with_flops}, with_modules={config.profile_with_modules}) "
            f"-> {save_path}/{trace} written by {export}"), []


class _Raw:
    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text
