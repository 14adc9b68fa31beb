"""Which processes the RL loop's inference side started: the forked HTTP front ends and the
spawned data-parallel coordinator, written to ``{HARNESS_REPORT_DIR}/rl_processes_rank{R}.json``
as soon as they run (the loop ends with ``os._exit``: nothing can wait for the end).

``MegatronLocal.launch`` imports ``get_dynamic_inference_engine`` and ``start_text_gen_server``
inside its body, at call time: wrapping the two module attributes is enough. Each wrapper only
watches: arguments and results pass through untouched.
"""

import json
import os


def _writer(rank):
    report = os.environ.get("HARNESS_REPORT_DIR")
    data = {"rank": rank, "pid": os.getpid(), "frontend_pids": [], "coordinator_pid": None}

    def write(**changes):
        data.update(changes)
        if report:
            with open(os.path.join(report, f"rl_processes_rank{rank}.json"), "w") as handle:
                json.dump(data, handle)

    return write


def install():
    import megatron.inference.utils as inference_utils
    from megatron.core.inference.text_generation_server import dynamic_text_gen_server as package
    from megatron.core.inference.text_generation_server.dynamic_text_gen_server import (
        text_generation_server as server_module,
    )

    write = _writer(int(os.environ.get("RANK", "0")))
    build, start = inference_utils.get_dynamic_inference_engine, package.start_text_gen_server

    def get_dynamic_inference_engine(*args, **kwargs):
        engine = build(*args, **kwargs)
        listen = engine.start_listening_to_data_parallel_coordinator

        async def start_listening(*a, **k):
            address = await listen(*a, **k)
            process = getattr(engine, "inference_coordinator_process", None)
            write(coordinator_pid=process.pid if process is not None else None)
            return address

        engine.start_listening_to_data_parallel_coordinator = start_listening
        return engine

    def start_text_gen_server(*args, **kwargs):
        result = start(*args, **kwargs)
        write(frontend_pids=[p.pid for p in server_module._SERVER_PROCESSES])
        return result

    inference_utils.get_dynamic_inference_engine = get_dynamic_inference_engine
    package.start_text_gen_server = start_text_gen_server
    write()
