"""HTTP control of a serving process (DESIGN §7): ``POST /start_profile`` and ``/stop_profile``.

The guide's inference paradigm (vLLM's): the route answers at once and the decision reaches every
engine rank at a unit boundary, on the thread that computes. This module is what the routes and
the engine ranks share, whatever the host (``patches/profile_routes.py`` binds it to Megatron's
servers):

- ``start_request(body, ...)``: a start body, checked. vLLM's knobs with vLLM's meaning:
  ``delay`` (units to skip before recording), ``max`` (units to record, then stop by itself; 0:
  until ``/stop_profile``), ``prefix`` (the window's folder name, never a path). Defaults come
  from the flags (``--profile-forwards A-B`` on the dynamic engine: delay A-1, max B-A+1).
- ``WindowControl``: one window at a time for the whole server. The routes of every front-end
  process (Megatron 0.19 forks several, all sharing one port) and the engine's rank 0 share it
  in memory made before the fork: a start while a window runs, or a stop with none running, is
  refused (409) whichever front end the client reached.

Nothing here imports a web framework or Megatron.
"""

import ctypes
import multiprocessing
import string
from typing import Any, Dict, Optional, Tuple

from ..config.window import WindowRequest

ROUTES = ("/start_profile", "/v1/start_profile", "/stop_profile", "/v1/stop_profile")
KNOBS = ("prefix", "delay", "max")
PREFIX_MAX = 64
_PREFIX_CHARS = set(string.ascii_letters + string.digits + "-_.")
# The key our knobs travel under in the relayed signal's payload (other payloads are upstream's).
PAYLOAD_KEY = "mindspeed_prof"

# WindowControl's shared slots
_OPEN, _GENERATION, _BUSY_BY_FLAGS, _LAST = range(4)


class BadRequest(ValueError):
    """A start body the route refuses (400), with the reason and the fix."""


def engine_defaults(config: Any) -> Tuple[int, int]:
    """(delay, max) of a start whose body does not say: ``--profile-forwards A-B`` (engine
    steps A..B of the window), else record from the next step until ``/stop_profile``."""
    if config.profile_forwards:
        first, last = config.profile_forwards[0]
        return first - 1, last - first + 1
    return 0, 0


def start_request(body: Any, default_delay: int = 0, default_max: int = 0) -> WindowRequest:
    """The window a start body asks for; ``BadRequest`` naming the field and the fix."""
    if body is None or body == b"" or body == "":
        body = {}
    if not isinstance(body, dict):
        raise BadRequest(f"the body must be a JSON object with any of {', '.join(KNOBS)} "
                         f"(e.g. {{\"prefix\": \"decode\", \"delay\": 2, \"max\": 5}}), "
                         f"not {type(body).__name__}")
    unknown = sorted(set(body) - set(KNOBS))
    if unknown:
        raise BadRequest(f"unknown field(s) {', '.join(map(repr, unknown))}; a start takes "
                         f"{', '.join(KNOBS)} (prefix: folder name, delay: units to skip, max: "
                         f"units to record)")
    delay = _count(body, "delay", default_delay)
    length = _count(body, "max", default_max)
    prefix = body.get("prefix")
    if prefix is not None:
        prefix = folder_name(prefix)
    return WindowRequest(delay=delay, length=length, prefix=prefix, by="http")


def _count(body: Dict[str, Any], key: str, default: int) -> int:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        meaning = "units to skip before recording" if key == "delay" else \
            "units to record, then stop (0: until /stop_profile)"
        raise BadRequest(f"{key!r} must be an integer >= 0 ({meaning}), not {value!r}")
    return value


def folder_name(prefix: Any) -> str:
    """A start's prefix as the folder name it becomes: letters, digits, '-', '_', '.', at most
    64 characters, not starting with '.': never a path (no separator, no '..')."""
    if not isinstance(prefix, str) or not prefix:
        raise BadRequest(f"'prefix' must be a non-empty folder name, not {prefix!r}")
    if "/" in prefix or "\\" in prefix or ".." in prefix or prefix.startswith("."):
        raise BadRequest(f"'prefix' {prefix!r} is not a folder name: no '/', '\\\\', '..' or "
                         f"leading '.'; it names one folder under --profile-save-path")
    if len(prefix) > PREFIX_MAX:
        raise BadRequest(f"'prefix' is {len(prefix)} characters long; use at most {PREFIX_MAX}")
    odd = sorted(set(prefix) - _PREFIX_CHARS)
    if odd:
        raise BadRequest(f"'prefix' {prefix!r} has character(s) {''.join(odd)!r}; use letters, "
                         f"digits, '-', '_' and '.'")
    return prefix


def payload(request: WindowRequest, generation: int) -> Dict[str, Any]:
    """What a start carries to the engine ranks inside Megatron's relayed signal."""
    return {PAYLOAD_KEY: 1, "generation": generation, "delay": request.delay,
            "max": request.length, "prefix": request.prefix}


def from_payload(data: Any, default_delay: int = 0, default_max: int = 0
                 ) -> Tuple[Optional[WindowRequest], Optional[int]]:
    """(request, generation) of a relayed start's payload; (defaults, None) for upstream's own
    signal (no payload: a route we did not replace); (None, None) for a payload that is not a
    well-formed start (a client of its own: refused by the caller)."""
    if not data:
        return WindowRequest(delay=default_delay, length=default_max, by="http"), None
    knobs = data[0] if isinstance(data, (list, tuple)) else data
    if not isinstance(knobs, dict) or knobs.get(PAYLOAD_KEY) != 1:
        return None, None
    try:
        request = start_request({k: knobs.get(k) for k in KNOBS}, default_delay, default_max)
    except BadRequest:
        return None, None
    generation = knobs.get("generation")
    return request, generation if isinstance(generation, int) else None


class WindowControl:
    """One window at a time across the processes of one server (see the module).

    Made by the process that will fork the front ends (or that serves itself, a Flask server),
    before it forks: the slots live in shared memory. Every call is short and takes the slots'
    lock; none waits for the engine."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("fork")
        self._slots = context.Array(ctypes.c_longlong, 4)
        self._expected_last: Optional[Tuple[int, int]] = None  # rank 0: (generation, unit)

    def try_start(self) -> Tuple[Optional[int], str]:
        """(the new window's generation, "") or (None, why not)."""
        with self._slots.get_lock():
            slots = self._slots
            if slots[_OPEN]:
                return None, (f"a window is already running (started over HTTP, window "
                              f"{slots[_GENERATION]}); POST /stop_profile first: one window "
                              f"at a time")
            if slots[_BUSY_BY_FLAGS]:
                return None, ("a window from the profiling flags is running now; start one "
                              "over HTTP once it ends (one window at a time)")
            slots[_OPEN], slots[_GENERATION] = 1, slots[_GENERATION] + 1
            return int(slots[_GENERATION]), ""

    def try_stop(self) -> Tuple[Optional[int], str]:
        """(the generation stopped, "") or (None, why not)."""
        with self._slots.get_lock():
            slots = self._slots
            if not slots[_OPEN]:
                last = slots[_LAST]
                ended = (f"; window {slots[_GENERATION]} ended by itself after its 'max' units"
                         if last and last == slots[_GENERATION] else "")
                return None, f"no window started over HTTP is running{ended}"
            slots[_OPEN] = 0
            return int(slots[_GENERATION]), ""

    @property
    def open(self) -> bool:
        return bool(self._slots[_OPEN])

    # -- the engine's rank 0 ---------------------------------------------------------------------

    def started(self, generation: Optional[int], asked_before: int, request: WindowRequest
                ) -> None:
        """The start reached rank 0 before unit ``asked_before``: a window with a length ends
        by itself after unit ``asked_before + delay + max - 1``."""
        if generation is not None and request.length:
            self._expected_last = (generation,
                                   asked_before + request.delay + request.length - 1)

    def unit_ended(self, n: int) -> None:
        """Rank 0 ended unit ``n``: a window whose length is reached closes here."""
        expected = self._expected_last
        if expected is None or n < expected[1]:
            return
        self._expected_last = None
        with self._slots.get_lock():
            if self._slots[_OPEN] and self._slots[_GENERATION] == expected[0]:
                self._slots[_OPEN], self._slots[_LAST] = 0, expected[0]

    def refused(self, generation: Optional[int]) -> None:
        """Rank 0 could not take the window (one from the flags ran): the routes know."""
        self._expected_last = None
        with self._slots.get_lock():
            if generation is not None and self._slots[_GENERATION] == generation:
                self._slots[_OPEN] = 0

    def flags_window(self, running: bool) -> None:
        """Rank 0's window from the flags (or the trigger) began or ended."""
        self._slots[_BUSY_BY_FLAGS] = 1 if running else 0
