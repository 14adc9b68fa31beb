"""Megatron's inference engine and MindSpeed-LLM's ``generate``: one call is one request.

Targets (the same in megatron-core 0.12.3 to 0.16.1):

- ``StaticInferenceEngine.generate``: one request of Megatron's text-generation server (or one
  offline batch), on every rank of the model; ``__init__`` arms the driver at start-up, on the
  main thread, so a bad window is refused before the first request.
- ``AbstractModelInferenceWrapper.run_one_forward_step``: one forward, labelled ``prefill`` or
  ``decode`` inside the request's session.
- MindSpeed-LLM's ``MegatronModuleForCausalLM.generate``: one request of ``inference.py``. With
  ``stream=True`` (its chat task) it returns a generator that computes the tokens as its caller
  iterates: the request lasts until that generator is consumed (``RequestDriver.serve``).
- Megatron-LM's legacy ``megatron.inference.text_generation.forward_step.ForwardStep.__call__``
  (Megatron-LM up to 0.14): the forward of each token in MindSpeed-LLM's generation loop, which
  never goes through megatron-core's engine; labelled as the engine's forward is (one label
  where both run).

Nothing here imports an inference module: each target is patched when its module is imported,
so a training process pays nothing. A process that never builds an engine nor serves a request
(the dynamic server's HTTP front end and coordinator) never creates a driver: it stays inert.
"""

import atexit
import functools
import os
import sys
import threading

from mindspeed_prof import log
from mindspeed_prof.config import ranks
from mindspeed_prof.drivers.base import NULL_DRIVER
from mindspeed_prof.drivers.inference import RequestDriver
from mindspeed_prof.errors import ConfigError
from mindspeed_prof.recording.exits import process_end_reason
from mindspeed_prof.patches import import_hooks
from mindspeed_prof.patches.engine_config import engine_config, megatron_args
from mindspeed_prof.patches.state import registry, state, usage_exit
from mindspeed_prof.patches.topology import distributed_args, rank_and_world, rank_layout

ENGINE = "megatron.core.inference.engines.static_engine.StaticInferenceEngine"
ENGINE_INIT = f"{ENGINE}.__init__"
ENGINE_GENERATE = f"{ENGINE}.generate"
FORWARD = ("megatron.core.inference.model_inference_wrappers.abstract_model_inference_wrapper."
           "AbstractModelInferenceWrapper.run_one_forward_step")
LEGACY_FORWARD = "megatron.inference.text_generation.forward_step.ForwardStep.__call__"
# Megatron's text-generation server: megatron-core's (0.15 on; the package imports MegatronServer)
# and Megatron-LM's own before it. A process that imported one serves requests; one that did not
# (MindSpeed-LLM's inference.py, an engine loop) runs them offline.
SERVERS = ("megatron.core.inference.text_generation_server",
           "megatron.inference.text_generation_server")
LLM_GENERATE = "mindspeed_llm.tasks.inference.module.MegatronModuleForCausalLM.generate"
# The server's HTTP loop, run by the one process that serves (the first TP rank of the first
# stage); every other rank runs the requests that process broadcasts, and leaves its loop when
# that process broadcasts the server's end.
SERVER_RUNS = (
    "megatron.core.inference.text_generation_server.text_generation_server.MegatronServer.run",
    "megatron.inference.text_generation_server.MegatronServer.run")

_lock = threading.Lock()
_served = threading.Event()  # this process ran the server's HTTP loop


def _driver():
    """This process's request driver, created (and armed) by the first engine or request."""
    driver = state.inference
    if driver is not NULL_DRIVER:
        return driver
    if state.training:
        return NULL_DRIVER
    config = engine_config(*rank_and_world(megatron_args()))
    if config is None or not config.profile or state.training:
        # Inside a training loop (Megatron's RL rollouts build an engine in train()) the window
        # flags count iterations, and the training driver owns them: no request is counted.
        return NULL_DRIVER
    with _lock:
        if state.inference is NULL_DRIVER:
            state.inference = _start_driver(config)
    return state.inference


def _start_driver(config):
    args = megatron_args()  # None: an engine driven without Megatron-LM's argument parsing
    rank, world = rank_and_world(args)
    try:
        layout = rank_layout(world) if ranks.needs_topology(config.profile_ranks) else None
        driver = RequestDriver(config, rank=rank, world_size=world,
                               local_rank=getattr(args, "local_rank", None), layout_of=layout,
                               parallel=distributed_args(args, rank, world) if args else None,
                               server=any(name in sys.modules for name in SERVERS))
        driver.arm(planned=state.window_given)
    except ConfigError as exc:
        _refuse(str(exc), rank)
    state.train_hooked = True  # the chain is connected: requests reach the driver
    # Registered after arm()'s own exit flush, so it runs first and names the real reason.
    atexit.register(_close_at_exit, driver)
    return driver


def _refuse(message, rank):
    if threading.current_thread() is threading.main_thread():
        usage_exit(message, rank=rank)
    # On a server's request thread SystemExit would end only that thread, and the ranks would
    # wait for each other in the next collective: stop the process, as start-up would have.
    log.error(message, rank=rank)
    state.usage_error = True
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(2)


def _close_at_exit(driver):
    reason, detail = process_end_reason()
    if reason in ("finished", "process exit") and _followed_the_server(driver):
        # Its loop ends only when the serving process broadcasts the end (or a collective with
        # it fails, which is an exception): "finished" would hide that it ended with its peer.
        reason, detail = "peer ended", (
            f"the serving rank stopped the server after {driver.requests} requests, and this "
            f"rank, which runs the requests that rank broadcasts, left its loop with it (the "
            f"serving rank's manifest says how it ended)")
    driver.close(reason, detail or f"the process ended after {driver.requests} requests")


def _followed_the_server(driver):
    """A rank of a text-generation server that did not serve HTTP itself."""
    return (not _served.is_set() and driver.recorder.world_size > 1
            and any(name in sys.modules for name in SERVERS))


def mindspeed_prof_server_run_wrapper(run):
    @functools.wraps(run)
    def run_remembered(*args, **kwargs):
        _served.set()
        return run(*args, **kwargs)

    return run_remembered


def mindspeed_prof_engine_init_wrapper(init):
    @functools.wraps(init)
    def init_then_arm(self, *args, **kwargs):
        # The dynamic engine it builds for itself runs this engine's requests: no driver of its
        # own (patches/dynamic_inference.py).
        building = state.static_building
        building.depth = getattr(building, "depth", 0) + 1
        try:
            init(self, *args, **kwargs)
        finally:
            building.depth -= 1
        _driver()

    return init_then_arm


def mindspeed_prof_generate_wrapper(generate):
    @functools.wraps(generate)
    def generate_as_one_request(*args, **kwargs):
        return _driver().serve(generate, args, kwargs)  # a returned generator stays in it

    return generate_as_one_request


def mindspeed_prof_forward_wrapper(run_one_forward_step):
    @functools.wraps(run_one_forward_step)
    def forward_in_labelled_range(*args, **kwargs):
        with state.inference.forward():  # the null driver's no-op where nothing records
            return run_one_forward_step(*args, **kwargs)

    return forward_in_labelled_range


TARGETS = (
    (ENGINE_INIT, mindspeed_prof_engine_init_wrapper),
    (ENGINE_GENERATE, mindspeed_prof_generate_wrapper),
    (FORWARD, mindspeed_prof_forward_wrapper),
    (LEGACY_FORWARD, mindspeed_prof_forward_wrapper),
    (LLM_GENERATE, mindspeed_prof_generate_wrapper),
    *((target, mindspeed_prof_server_run_wrapper) for target in SERVER_RUNS),
)


def _module_of(target):
    return target.rsplit(".", 2)[0]  # module.Class.method


def hook_inference():
    """Patch every inference target now if its module is loaded, else as soon as it loads.

    Loaded already (the entry script imported it): through MindSpeed's patch manager when it is
    active, as the training patches. Loaded later: from the import hook, beside MindSpeed's
    manager, which may be importing that very module inside its own apply loop."""
    for target, decorator in TARGETS:
        module = _module_of(target)
        if module in sys.modules:
            registry.register(target, decorator)
            registry.ensure(target)
        else:
            import_hooks.when_imported(module, functools.partial(_patch_late, target, decorator))


def _patch_late(target, decorator, module):
    registry.register(target, decorator, through_mindspeed=False)
    registry.ensure(target)
