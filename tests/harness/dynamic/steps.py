"""What each engine rank did, step by step, kept in ``{HARNESS_REPORT_DIR}/dynamic_rank{R}.json``.

:class:`StepLog` watches a ``DynamicInferenceEngine`` from outside (instance attributes only; the
engine's code is untouched):

* every ``async_step`` (the engine step, the unit ``run_engine_with_coordinator``, ``run_engine``,
  ``step_modern`` and ``generate`` all await): its number (``context.step_count`` after it), the
  thread that ran it, the requests still active and the ones that finished (with their prompt
  and generated tokens, the step they finished at and, given ``reference``, what a no-KV-cache
  forward predicts for them);
* every forward inside it (``TextGenerationController._dynamic_step_forward_logits``): the batch
  the context scheduled (``context.batch_dimensions``: prefill/decode request counts, tokens) and
  the chunked-prefill request, read at forward time, so a step is labelled prefill, decode or
  mixed from what actually ran;
* ``controller.dummy_forward()`` calls: ``run_engine_with_coordinator`` runs one (and counts it
  in ``context.step_count``) outside ``async_step`` while its cached consensus still says there
  is work but this rank has none (0.18.2's dummy forward also zeroes ``context.step_count``
  through ``context.reset()``: step numbers here continue across it, ``lost``);
* ``torch.cuda.cudart().cudaProfilerStart/Stop`` calls (the server's relayed profile signal):
  the caller, the thread and the step count when each landed.

The file is rewritten atomically after every step and every profiler call, so a rank stopped by
a signal still leaves what it did.
"""

import json
import os
import threading
import time


def step_kind(prefill_requests, decode_requests):
    """``prefill``, ``decode`` or ``mixed``, from the requests a forward carried."""
    if prefill_requests and decode_requests:
        return "mixed"
    return "prefill" if prefill_requests else "decode"


class StepLog:
    """Per-rank record of engine steps, forwards, finished requests and profiler calls."""

    def __init__(self, rank, path=None, reference=None, **fields):
        self.path = path
        self.reference = reference
        self.engine = None
        self.data = {"rank": rank, "pid": os.getpid(),
                     "main_thread": threading.main_thread().native_id, "steps": [],
                     "requests": {}, "dummy_forwards": [], "profiler_calls": [],
                     "started": time.time(), **fields}
        self._forwards = []
        self._lock = threading.Lock()
        self.lost = 0  # steps 0.18.2's dummy forwards took out of context.step_count

    @classmethod
    def from_env(cls, rank, reference=None, **fields):
        folder = os.environ.get("HARNESS_REPORT_DIR")
        path = os.path.join(folder, f"dynamic_rank{rank}.json") if folder else None
        return cls(rank, path, reference, **fields)

    def attach(self, engine):
        """Watch ``engine``'s steps, forwards and dummy forwards."""
        self.engine = engine
        controller = engine.controller
        original_step = engine.async_step
        original_forward = controller._dynamic_step_forward_logits
        original_dummy = controller.dummy_forward

        async def async_step(*args, **kwargs):
            result = await original_step(*args, **kwargs)
            self._step_done(result)
            return result

        def forward_logits(*args, **kwargs):
            dims = engine.context.batch_dimensions
            self._forwards.append({
                "prefill_requests": dims.prefill_req_count,
                "decode_requests": dims.decode_req_count, "tokens": dims.token_count,
                "kind": step_kind(dims.prefill_req_count, dims.decode_req_count),
                "chunked_prefill_request_id": engine.context.chunked_prefill_request_id,
                "thread": threading.get_native_id()})
            return original_forward(*args, **kwargs)

        def dummy_forward(*args, **kwargs):
            before = engine.context.step_count
            result = original_dummy(*args, **kwargs)
            with self._lock:
                # The engine adds 1 to step_count right after this returns.
                self.data["dummy_forwards"].append({"step": before + 1 + self.lost,
                                                    "thread": threading.get_native_id()})
                if engine.context.step_count == 0:  # 0.18.2's context.reset() zeroed it
                    self.lost += before
            return result

        engine.async_step = async_step
        controller._dynamic_step_forward_logits = forward_logits
        controller.dummy_forward = dummy_forward
        return self

    def _step_done(self, result):
        step = self.engine.context.step_count + self.lost
        finished = {}
        for record in result["finished_request_records"]:
            request = record.merge()
            prompt = [int(t) for t in request.prompt_tokens.tolist()]
            generated = [int(t) for t in request.generated_tokens]
            finished[str(request.request_id)] = {"prompt": prompt, "generated": generated,
                                                 "finished_at_step": step}
            if self.reference is not None:
                # Every TP rank finishes the same requests in the same step: the reference
                # forward (a TP collective) lines up across ranks.
                finished[str(request.request_id)]["reference"] = self.reference(prompt, generated)
        with self._lock:
            for request_id, fields in finished.items():
                self.data["requests"].setdefault(request_id, {}).update(fields)
            self.data["steps"].append({
                "step": step, "thread": threading.get_native_id(), "forwards": self._forwards,
                "active_request_ids": [int(i) for i in result["active_request_ids"]],
                "finished_request_ids": [int(i) for i in finished], "time": time.time(),
                # the engine loop's iterations (0.19): TP ranks' must agree (FACTS.md)
                "loop_counter": getattr(self.engine, "_ep_consensus_loop_counter", None)})
            self._forwards = []
        self.write()

    def profiler_call(self, call):
        """A ``cuda_extras.CUDART`` listener: where a relayed profile signal landed."""
        step_count = self.engine.context.step_count if self.engine is not None else None
        with self._lock:
            self.data["profiler_calls"].append(dict(call, step_count=step_count))
        self.write()

    def request(self, request_id, **fields):
        with self._lock:
            self.data["requests"].setdefault(str(request_id), {}).update(fields)

    def set(self, **fields):
        with self._lock:
            self.data.update(fields)
        self.write()

    def write(self):
        if self.path is None:
            return
        with self._lock:
            text = json.dumps(self.data, indent=1, sort_keys=True)
        partial = f"{self.path}.{os.getpid()}.{threading.get_native_id()}.tmp"
        with open(partial, "w") as handle:
            handle.write(text)
        os.replace(partial, self.path)
