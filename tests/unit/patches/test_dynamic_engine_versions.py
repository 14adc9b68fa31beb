"""How the engine-step hooks meet each megatron-core version (patches/dynamic_control.py,
patches/dynamic_inference.py): 0.19 relays the profile signal itself; 0.17 and 0.18 get a pipe
from the routes (in a forked front end) to rank 0 and one broadcast to every rank; 0.18.2's
dummy forward zeroes ``context.step_count`` and the step numbers go on across it; an engine
before 0.17 and a multi-replica server that could never open a window are refused with exit 2.
The imitations below have the shapes of the real classes (named in each test); the real engines
run in tests/e2e/test_dynamic_profiling.py."""

import contextlib
import importlib.metadata
import multiprocessing
import types
import weakref

import pytest

from mindspeed_prof.config.window import WindowRequest
from mindspeed_prof.patches import dynamic_control, dynamic_inference, serving
from mindspeed_prof.patches.state import state

try:
    from packaging.version import Version

    CORE = Version(importlib.metadata.version("megatron-core"))
except (ImportError, importlib.metadata.PackageNotFoundError):
    CORE = None


@pytest.fixture
def mailbox(monkeypatch):
    monkeypatch.setattr(dynamic_control, "_mailbox", None)
    monkeypatch.setattr(dynamic_control, "_rest", b"")
    assert dynamic_control.open_mailbox(None) is True
    yield
    for fd in dynamic_control._mailbox or ():
        with contextlib.suppress(OSError):
            __import__("os").close(fd)


def _front_end(prefix):
    """What a route does in a front end, a process forked from rank 0 after the pipe opened."""
    failed = dynamic_control.post("start", 1, WindowRequest(delay=2, length=3, prefix=prefix))
    failed = failed or dynamic_control.post("stop", 1)
    raise SystemExit(1 if failed else 0)


def test_commands_posted_by_a_forked_front_end_reach_rank_0_in_order_as_json(mailbox):
    child = multiprocessing.get_context("fork").Process(target=_front_end, args=("decode",))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert dynamic_control._take() == [
        {"kind": "start", "generation": 1, "delay": 2, "max": 3, "prefix": "decode"},
        {"kind": "stop", "generation": 1}]
    assert dynamic_control._take() == []  # each command is taken once


def test_a_post_with_no_pipe_says_why_instead_of_vanishing(monkeypatch):
    monkeypatch.setattr(dynamic_control, "_mailbox", None)
    assert "does not take commands now" in dynamic_control.post("stop", 3)


class Context:
    """DynamicInferenceContext's step counter (0.17-0.19: ``context.step_count``)."""

    def __init__(self):
        self.step_count = 0


class Driver:
    """What the hooks call on EngineStepDriver: the numbers of the steps they open."""

    def __init__(self):
        self.numbers, self.kinds, self.in_step, self.rank = [], [], False, 0
        self.windows = []
        self.recorder = types.SimpleNamespace(planned_window_running=False)

    @contextlib.contextmanager
    def step(self, n):
        self.numbers.append(n)
        self.kinds.append("step")
        yield types.SimpleNamespace(finished=[])

    @contextlib.contextmanager
    def dummy(self, n):
        self.numbers.append(n)
        self.kinds.append("dummy")
        yield

    def start_window(self, next_step, request):
        self.windows.append(("start", next_step, request.delay, request.length, request.prefix))
        return "queued"

    def stop_window(self):
        self.windows.append(("stop",))
        return "stopped"


class Engine:
    """DynamicInferenceEngine's shape the hooks read (weak-referenceable, as a class is)."""

    def __init__(self):
        self.context, self.controller = Context(), types.SimpleNamespace()

    async def async_step(self):
        self.context.step_count += 1
        return {"finished_request_records": []}


@pytest.fixture
def engine(monkeypatch):
    """An engine as run_engine_with_coordinator drives it: ``async_step`` adds 1 to the count
    after its forward; a dummy forward is followed by the loop's own ``step_count += 1``."""
    engine = Engine()
    driver = Driver()
    monkeypatch.setattr(state, "engine", driver)
    monkeypatch.setattr(serving, "engine_ref", weakref.ref(engine))
    monkeypatch.setattr(serving, "lost", 0)
    monkeypatch.setattr(serving, "control", None)
    engine.driver = driver
    return engine


def _dummy_forward(zeroes):
    def dummy_forward(controller):
        if zeroes:  # 0.18.2: context.reset() inside, without preserve_counters
            dummy_forward.engine.context.step_count = 0
    return dummy_forward


@pytest.mark.parametrize("shape", ["0.18.2 zeroes the count", "0.17/0.19 keep it"])
def test_step_numbers_go_on_across_a_dummy_forward_whatever_it_does_to_the_count(engine, shape):
    import asyncio

    step = dynamic_inference.mindspeed_prof_engine_step_wrapper(Engine.async_step)
    raw = _dummy_forward(zeroes=shape.startswith("0.18"))
    raw.engine = engine
    dummy = dynamic_inference.mindspeed_prof_dummy_forward_wrapper(raw)

    def loop_dummy():  # run_engine_with_coordinator's dummy branch
        dummy(engine.controller)
        engine.context.step_count += 1

    for run in ("step", "step", "step", "dummy", "dummy", "step"):
        asyncio.run(step(engine)) if run == "step" else loop_dummy()
    assert engine.driver.numbers == [1, 2, 3, 4, 5, 6]
    assert engine.driver.kinds == ["step"] * 3 + ["dummy"] * 2 + ["step"]
    assert dynamic_inference.next_step(engine) == 7


def test_a_command_in_the_pipe_opens_and_ends_the_window_at_the_next_step_boundary(
        engine, mailbox, capsys):
    engine.context.step_count = 4
    dynamic_control.post("start", 1, WindowRequest(delay=1, length=2, prefix="decode"))
    dynamic_control.relay_at_boundary(engine)  # one process: the broadcast is rank 0's value
    dynamic_control.post("stop", 1)
    dynamic_control.relay_at_boundary(engine)
    assert engine.driver.windows == [("start", 5, 1, 2, "decode"), ("stop",)]
    out = capsys.readouterr().out
    assert "POST /start_profile: queued before engine step 5 (delay 1, max 2, prefix decode)" in out
    assert "POST /stop_profile: stopped after engine step 4" in out


def test_a_multi_replica_engine_before_0_19_waiting_for_http_is_refused_naming_the_version(
        engine, monkeypatch, capsys):
    monkeypatch.setattr(dynamic_control, "one_replica", lambda engine: False)
    monkeypatch.setattr(dynamic_control, "signals_relayed", lambda: False)
    monkeypatch.setattr(dynamic_control, "core_version", lambda: "0.18.2")
    monkeypatch.setattr(state, "window_given", False)
    with pytest.raises(SystemExit) as stopped:
        dynamic_control.refuse_unsupported(engine, rank=0)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "megatron-core 0.18.2's dynamic server has no /start_profile relay across " \
           "data-parallel replicas" in err
    assert "--profile-step-start" in err and "upgrade megatron-core to 0.19" in err
    monkeypatch.setattr(state, "window_given", True)  # with a window flag: it runs
    dynamic_control.refuse_unsupported(engine, rank=0)
    monkeypatch.setattr(state, "window_given", False)
    monkeypatch.setattr(dynamic_control, "signals_relayed", lambda: True)  # 0.19: it runs
    dynamic_control.refuse_unsupported(engine, rank=0)


def test_a_multi_replica_server_before_0_19_with_window_flags_serves_without_the_routes(
        monkeypatch, capsys):
    monkeypatch.setattr(dynamic_control, "one_replica", lambda engine: False)
    monkeypatch.setattr(dynamic_control, "_mailbox", None)
    assert dynamic_control.open_mailbox(object()) is False
    assert dynamic_control._mailbox is None
    assert "POST /start_profile and /stop_profile are not added" in capsys.readouterr().err


def test_an_engine_that_does_not_count_steps_in_its_context_is_refused_naming_the_version(
        monkeypatch, capsys):
    monkeypatch.setattr(dynamic_control, "core_version", lambda: "0.16.1")
    old = types.SimpleNamespace(context=types.SimpleNamespace(), step_count=0)  # 0.16's shape
    with pytest.raises(SystemExit) as stopped:
        dynamic_control.refuse_unsupported(old, rank=0)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "megatron-core 0.16.1's DynamicInferenceEngine is not supported by --profile" in err
    assert "from megatron-core 0.17" in err
    monkeypatch.setattr(state, "window_given", True)
    dynamic_control.refuse_unsupported(types.SimpleNamespace(context=Context()), rank=0)


@pytest.mark.skipif(CORE is None, reason="needs megatron-core (any version)")
def test_only_megatron_core_0_19_relays_the_profile_signal_itself():
    assert dynamic_control.signals_relayed() is (CORE >= Version("0.19"))


@pytest.mark.skipif(CORE is None or CORE >= Version("0.17"),
                    reason=f"the engine before 0.17 (found {CORE or 'none'}): the Python 3.11 "
                           f"leg's megatron-core 0.16.1")
def test_megatron_core_before_0_17_numbers_its_steps_on_the_engine_not_its_context():
    """The shape refuse_unsupported() tells apart, read in the installed code."""
    import inspect

    from megatron.core.inference.contexts.dynamic_context import DynamicInferenceContext
    from megatron.core.inference.engines.dynamic_engine import DynamicInferenceEngine

    assert "self.step_count" not in inspect.getsource(DynamicInferenceContext)
    assert "self.step_count += 1" in inspect.getsource(DynamicInferenceEngine)
