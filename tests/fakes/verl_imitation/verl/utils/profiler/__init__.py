"""verl/utils/profiler/profile.py: DistProfiler picks a backend by ``config.tool`` and falls back
to a no-op for any other tool; DistProfilerExtension gives workers the registered
start_profile/stop_profile the trainer calls on its profiled steps. The imitation records what
it was asked to do instead of profiling."""

from verl.single_controller.base.decorator import Dispatch, register

TOOLS = ("nsys", "npu", "torch", "torch_memory", "precision_debugger")


class DistProfiler:
    def __init__(self, rank, config=None, tool_config=None, save_file_prefix=None, **kwargs):
        config = config or {}
        self.rank = rank
        self.tool = config.get("tool")
        self.enable = bool(config.get("enable")) and self.tool in TOOLS
        self.calls = []

    def start(self, **kwargs):
        self.calls.append(("start", kwargs))

    def stop(self, run_command=True):
        self.calls.append(("stop", {"run_command": run_command}))


class DistProfilerExtension:
    def __init__(self, profiler):
        self.profiler = profiler

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def start_profile(self, **kwargs):
        self.profiler.start(**kwargs)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def stop_profile(self, run_command=True):
        self.profiler.stop(run_command=run_command)
