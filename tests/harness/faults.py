"""Test-only misbehaviour injected into the stand-in's training step.

Iterations are the logged (1-based) numbers. Environment knobs:

* ``HARNESS_RAISE_AT_ITER=N``: raise ``RuntimeError`` inside the step of iteration N;
* ``HARNESS_SIGNAL_AT_ITER=N`` with ``HARNESS_SIGNAL=TERM|INT`` (default TERM): send that
  signal to this process during iteration N;
* ``HARNESS_SLEEP_AT_ITER=N:SECONDS``: sleep that long inside iteration N;
* ``HARNESS_FAULT_RANKS=0,1``: only these global ranks misbehave (default: all).
"""

import dataclasses
import os
import signal
import time

_SIGNALS = {"TERM": signal.SIGTERM, "INT": signal.SIGINT}


def _optional_int(value):
    return int(value) if value else None


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    raise_at: int = None
    signal_at: int = None
    signal_name: str = "TERM"
    sleep_at: int = None
    sleep_s: float = 0.0

    @classmethod
    def from_env(cls, env):
        ranks = env.get("HARNESS_FAULT_RANKS")
        rank = int(env.get("RANK", "0"))
        if ranks and rank not in {int(r) for r in ranks.split(",")}:
            return cls()
        signal_name = env.get("HARNESS_SIGNAL", "TERM").upper().removeprefix("SIG")
        if signal_name not in _SIGNALS:
            raise ValueError(f"HARNESS_SIGNAL={signal_name} must be one of {sorted(_SIGNALS)}")
        sleep_at, _, sleep_s = env.get("HARNESS_SLEEP_AT_ITER", "").partition(":")
        return cls(
            raise_at=_optional_int(env.get("HARNESS_RAISE_AT_ITER")),
            signal_at=_optional_int(env.get("HARNESS_SIGNAL_AT_ITER")),
            signal_name=signal_name,
            sleep_at=_optional_int(sleep_at),
            sleep_s=float(sleep_s or 0.0),
        )

    def at_step(self, iteration):
        """Misbehave as planned for logged iteration ``iteration``."""
        if iteration == self.sleep_at:
            time.sleep(self.sleep_s)
        if iteration == self.signal_at:
            os.kill(os.getpid(), _SIGNALS[self.signal_name])
        if iteration == self.raise_at:
            raise RuntimeError(f"HARNESS_RAISE_AT_ITER: injected failure at iteration {iteration}")
