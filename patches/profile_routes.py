"""``POST /start_profile`` and ``/stop_profile`` on Megatron's servers, with ``--profile`` only.

Where they are bound is where the host's server binds (no listener of our own):

- **Megatron 0.19's dynamic server** (``start_text_gen_server``: Quart front ends forked from
  rank 0, all on one port) has the two routes (also under ``/v1/``), relaying
  ``START/STOP_CUDA_PROFILER`` to every engine rank. With ``--profile`` its ``profile_api``
  blueprint is replaced, before the fork, by ours: the same paths, checking the start body
  (``prefix``, ``delay``, ``max``: http_control), one window at a time across every front end
  (409), and relaying the knobs in the signal's payload; ``patches/dynamic_inference.py`` opens
  the window on each engine rank at its next step boundary. The route answers at once.
- **The static server** (``MegatronServer``, Flask, rank 0 only, a thread per request) has no
  such routes: they are added to its app. A start or stop is queued on rank 0 and reaches every
  rank at the next request boundary through one broadcast at the start of ``run_mcore_engine``
  (which every rank runs for every request of that server): the poll's JSON exchange.

- **Dynamic servers of 0.17 and 0.18** (the same ``start_text_gen_server``) have neither the
  routes nor the relay: ours are added to its blueprints and a command reaches every engine
  rank through ``patches/dynamic_control.py``'s pipe and broadcast at the next step boundary.

Every route first asks who calls (``http_control.refusal``): callers on this machine only unless
``--profile-http-allow-remote``, and the shared token when ``--profile-http-token`` is set.
A start whose prefix names something in the save path that is no folder is refused (400), as is
a body that is not a JSON object (said as what it is); a body past ``http_control.BODY_LIMIT``
(1 MiB) is refused with 413 on every server.

Without ``--profile`` nothing here is patched and the routes are the host's own, if any.
"""

import functools
import sys
import threading

from mindspeed_prof.control import http_control
from mindspeed_prof import log
from mindspeed_prof.patches import dynamic_control, import_hooks, serving
from mindspeed_prof.patches.state import registry, state

DYNAMIC_SERVER = ("megatron.core.inference.text_generation_server.dynamic_text_gen_server."
                  "text_generation_server.start_text_gen_server")
STATIC_SERVER = ("megatron.core.inference.text_generation_server.text_generation_server."
                 "MegatronServer.__init__")
RUN_MCORE_ENGINE = ("megatron.core.inference.text_generation_server.run_mcore_engine."
                    "run_mcore_engine")
ENDPOINTS = "megatron.core.inference.text_generation_server.dynamic_text_gen_server.endpoints"

_pending: list = []  # the static server's rank 0: commands for the next request boundary
_pending_lock = threading.Lock()
# Requests this rank began through run_mcore_engine (the static server runs it once per request
# on every rank): rank 0's count of the units it relayed, profiled or not.
_relayed = 0


def _profiling():
    return state.config is not None and state.config.profile and not state.training


def _refused(remote_addr, authorization):
    """(JSON body, status) when this caller may not use the profile routes, else None."""
    refused = http_control.refusal(state.config, remote_addr, authorization)
    if refused is None:
        return None
    status, why = refused
    return {"status": "error", "details": why}, status


def _window_refusal(window):
    """Why a well-formed start cannot open its window in this save path, else None."""
    return http_control.prefix_refusal(window, state.config.profile_save_path)


_control = serving.server_control  # made once by the process that serves, before it forks


# -- Megatron 0.19's dynamic server -----------------------------------------------------------

def mindspeed_prof_start_text_gen_server_wrapper(start_text_gen_server):
    @functools.wraps(start_text_gen_server)
    def serve_with_our_profile_routes(*args, **kwargs):
        if _profiling() and dynamic_control.routes_ready():
            _control()
            _replace_blueprint()
        return start_text_gen_server(*args, **kwargs)

    return serve_with_our_profile_routes


def _replace_blueprint():
    endpoints = sys.modules.get(ENDPOINTS)
    blueprints = getattr(endpoints, "__all__", None)
    if not isinstance(blueprints, list):
        return
    ours = _quart_blueprint()
    for index, blueprint in enumerate(blueprints):
        if getattr(blueprint, "name", None) == "profile_api":
            blueprints[index] = ours
            return
    if ours not in blueprints:
        blueprints.append(ours)  # a server without the routes: ours are added


def _quart_blueprint():
    from quart import Blueprint, current_app, jsonify, request

    blueprint = Blueprint("mindspeed_prof_profile", __name__)
    defaults = http_control.engine_defaults(state.config)

    async def start_profile():
        refused = _refused(request.remote_addr, request.headers.get(http_control.TOKEN_HEADER))
        if refused:
            return jsonify(refused[0]), refused[1]
        client = current_app.config.get("client")
        if client is None:
            return jsonify({"status": "error", "details": "client not initialized"}), 503
        data = await _quart_data(request)
        if data is None:
            return jsonify(_too_large(request)), 413
        try:
            window = http_control.start_request(http_control.read_body(data), *defaults)
        except http_control.BadRequest as exc:
            return jsonify({"status": "error", "details": str(exc)}), 400
        why = _window_refusal(window)
        if why:
            return jsonify({"status": "error", "details": why}), 400
        generation, why = _control().try_start()
        if generation is None:
            return jsonify({"status": "error", "details": why}), 409
        failed = dynamic_control.send(client, "start", generation, window)
        if failed:
            _control().refused(generation)
            return jsonify({"status": "error", "details": failed}), 503
        return jsonify(_started(window, generation, "engine steps")), 200

    async def stop_profile():
        refused = _refused(request.remote_addr, request.headers.get(http_control.TOKEN_HEADER))
        if refused:
            return jsonify(refused[0]), refused[1]
        client = current_app.config.get("client")
        if client is None:
            return jsonify({"status": "error", "details": "client not initialized"}), 503
        if await _quart_data(request) is None:
            return jsonify(_too_large(request)), 413
        generation, why = _control().try_stop()
        if generation is None:
            return jsonify({"status": "error", "details": why}), 409
        failed = dynamic_control.send(client, "stop", generation)
        if failed:
            return jsonify({"status": "error", "details": failed}), 503
        return jsonify({"status": "ok", "action": "stop_profile", "window": generation}), 200

    for path in http_control.ROUTES:
        view = start_profile if "start" in path else stop_profile
        blueprint.add_url_rule(path, endpoint=path.strip("/").replace("/", "_"),
                               view_func=view, methods=["POST"])
    return blueprint


async def _quart_data(request):
    """The body's bytes, or None past ``http_control.BODY_LIMIT`` (read no further)."""
    limit = http_control.BODY_LIMIT
    if request.content_length is not None and request.content_length > limit:
        return None
    data = bytearray()
    async for chunk in request.body:
        data += chunk
        if len(data) > limit:
            return None
    return bytes(data)


def _flask_data(request):
    """The body's bytes, or None past ``http_control.BODY_LIMIT`` (read no further)."""
    limit = http_control.BODY_LIMIT
    if request.content_length is not None and request.content_length > limit:
        return None
    data = request.stream.read(limit + 1)
    return None if len(data) > limit else data


def _too_large(request):
    return {"status": "error", "details": http_control.body_too_large(request.content_length)}


def _started(window, generation, units):
    return {"status": "ok", "action": "start_profile", "window": generation,
            "delay": window.delay, "max": window.length or None, "prefix": window.prefix,
            "counted_in": units}


# -- the static server (MegatronServer) ---------------------------------------------------------

def mindspeed_prof_megatron_server_wrapper(init):
    @functools.wraps(init)
    def init_with_profile_routes(self, *args, **kwargs):
        init(self, *args, **kwargs)
        app = getattr(self, "app", None)
        if _profiling() and app is not None:
            _control()
            _add_flask_routes(app)

    return init_with_profile_routes


def _add_flask_routes(app):
    from flask import jsonify, request

    def start_profile():
        refused = _refused(request.remote_addr, request.headers.get(http_control.TOKEN_HEADER))
        if refused:
            return jsonify(refused[0]), refused[1]
        data = _flask_data(request)
        if data is None:
            return jsonify(_too_large(request)), 413
        try:
            window = http_control.start_request(http_control.read_body(data))
        except http_control.BadRequest as exc:
            return jsonify({"status": "error", "details": str(exc)}), 400
        why = _window_refusal(window)
        if why:
            return jsonify({"status": "error", "details": why}), 400
        generation, why = _control().try_start()
        if generation is None:
            return jsonify({"status": "error", "details": why}), 409
        with _pending_lock:
            _pending.append(("start", generation, window))
        return jsonify(_started(window, generation, "requests")), 200

    def stop_profile():
        refused = _refused(request.remote_addr, request.headers.get(http_control.TOKEN_HEADER))
        if refused:
            return jsonify(refused[0]), refused[1]
        if _flask_data(request) is None:
            return jsonify(_too_large(request)), 413
        generation, why = _control().try_stop()
        if generation is None:
            return jsonify({"status": "error", "details": why}), 409
        with _pending_lock:
            _pending.append(("stop", generation, None))
        return jsonify({"status": "ok", "action": "stop_profile", "window": generation}), 200

    for path in http_control.ROUTES:
        view = start_profile if "start" in path else stop_profile
        app.add_url_rule(path, endpoint=f"mindspeed_prof_{path.strip('/').replace('/', '_')}",
                         view_func=view, methods=["POST"])


def mindspeed_prof_run_mcore_engine_wrapper(run_mcore_engine):
    @functools.wraps(run_mcore_engine)
    def request_after_profile_decisions(*args, **kwargs):
        global _relayed
        if not _profiling():
            return run_mcore_engine(*args, **kwargs)
        _apply_decisions()
        _relayed += 1
        result = run_mcore_engine(*args, **kwargs)
        if serving.control is not None:  # rank 0 of a static server with --profile
            # Whether or not rank 0 records: a window with a length ends for the routes here,
            # and one rank 0 records ends for them when it ended there (its budget).
            serving.control.unit_ended(_served(state.inference),
                                                 _asked_pending(state.inference))
        return result

    return request_after_profile_decisions


def _apply_decisions():
    """Every rank, before the request: rank 0's queued starts and stops, in one broadcast (the
    poll's JSON exchange: nothing a rank receives is executed)."""
    from mindspeed_prof.patches.topology import rank_and_world

    rank, world = rank_and_world(None)
    with _pending_lock:
        mine = [[kind, generation, _knobs(window)] for kind, generation, window in _pending] \
            if rank == 0 else None
        _pending.clear()
    commands = serving.from_rank0(mine, rank, world) or []
    driver = state.inference
    control = serving.control
    for kind, generation, knobs in commands:
        window = http_control.start_request(knobs) if kind == "start" else None
        if not hasattr(driver, "start_window"):
            break  # nothing profiled in this process (the null driver)
        answer = driver.start_window(window) if kind == "start" else driver.stop_window()
        following = _served(driver) + 1
        if control is not None and kind == "start":
            control.answered(generation, answer, following, window)
        if rank == 0:
            if answer == "not recorded here":
                answer = (f"window {generation} relayed to the profiled ranks (rank 0 is not "
                          f"one of --profile-ranks)")
            log.info(f"POST /{kind}_profile: {answer} before request {following}")


def _asked_pending(driver):
    """Whether rank 0's recorder still holds the window asked over HTTP (None: no recorder)."""
    recorder = getattr(driver, "recorder", None)
    return None if recorder is None else recorder.asked_window_pending


def _served(driver):
    """The number of the last request begun on this rank: the driver's own count where it
    records, else the routes' count of run_mcore_engine calls (a rank that records nothing,
    such as rank 0 under --profile-ranks 1, counts no request but serves every one)."""
    recorder = getattr(driver, "recorder", None)
    if recorder is not None and not recorder.idle:
        return driver.requests
    return _relayed


def _knobs(window):
    if window is None:
        return None
    return {"delay": window.delay, "max": window.length, "prefix": window.prefix}



TARGETS = (
    (DYNAMIC_SERVER, mindspeed_prof_start_text_gen_server_wrapper),
    (STATIC_SERVER, mindspeed_prof_megatron_server_wrapper),
    (RUN_MCORE_ENGINE, mindspeed_prof_run_mcore_engine_wrapper),
)


def _module_of(target):
    parts = target.split(".")
    return ".".join(parts[:-2]) if parts[-1] == "__init__" else ".".join(parts[:-1])


def hook_profile_routes():
    """Patch each server target when its module loads (now, if loaded)."""
    for target, decorator in TARGETS:
        module = _module_of(target)
        if module in sys.modules:
            _patch(target, decorator)
        else:
            import_hooks.when_imported(module, functools.partial(_patch_late, target, decorator))


def _patch(target, decorator, through_mindspeed=True):
    owner = sys.modules.get(_module_of(target))
    if target.endswith(".__init__"):
        owner = getattr(owner, target.rsplit(".", 2)[1], None)
    if owner is None or not hasattr(owner, target.rsplit(".", 1)[1]):
        return  # a megatron-core without this server: nothing to add there
    registry.register(target, decorator, through_mindspeed=through_mindspeed)
    registry.ensure(target)


def _patch_late(target, decorator, module):
    _patch(target, decorator, through_mindspeed=False)
