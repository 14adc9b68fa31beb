"""HTTP control of a serving process (DESIGN §7): ``POST /start_profile`` and ``/stop_profile``.

The guide's inference paradigm (vLLM's): the route answers at once and the decision reaches every
engine rank at a unit boundary, on the thread that computes. This module is what the routes and
the engine ranks share, whatever the host (``patches/profile_routes.py`` binds it to Megatron's
servers):

- ``read_body(data)``: a request's bytes as JSON, at most ``BODY_LIMIT`` bytes (413 past it:
  ``body_too_large``); what is not a JSON object is refused (400) saying what it is (not JSON,
  nested past what the parser follows, JSON ``null``), never with a framework's error page.
- ``start_request(body, ...)``: a start body, checked. vLLM's knobs with vLLM's meaning:
  ``delay`` (units to skip before recording), ``max`` (units to record, then stop by itself; 0:
  until ``/stop_profile``), ``prefix`` (the window's folder name, never a path). Defaults come
  from the flags (``--profile-forwards A-B`` on the dynamic engine: delay A-1, max B-A+1).
- ``refusal(...)``: who may call the routes (DESIGN §7). They write to disk on request, so by
  default they answer only callers on this machine (loopback): 403 with the fix otherwise.
  ``--profile-http-allow-remote`` opens them to the network; ``--profile-http-token`` makes
  every caller show ``Authorization: Bearer <token>`` (compared in constant time), 401 without.
- ``prefix_refusal(prefix, save_path)``: a prefix naming something already in the save path
  that is not a folder (a manifest, a trace) is refused, as names the readers treat specially
  are (``layout.reserved_name``).
- ``WindowBudget``: a window started over HTTP with no ``max`` and no ``--profile-max-gb`` stops
  on each rank once it wrote ``DEFAULT_WINDOW_GB`` (a client that never stops cannot fill the
  disk).
- ``WindowControl``: one window at a time for the whole server. The routes of every front-end
  process (Megatron 0.19 forks several, all sharing one port) and the engine's rank 0 share it
  in memory made before the fork: a start while a window runs, or a stop with none running, is
  refused (409) whichever front end the client reached.

Nothing here imports a web framework or Megatron.
"""

import ctypes
import hmac
import ipaddress
import json
import multiprocessing
import os
import string
from typing import Any, Dict, Optional, Tuple

from .. import layout
from ..config.budget import GB, RankBudget, estimate, used_bytes
from ..config.window import WindowRequest

ROUTES = ("/start_profile", "/v1/start_profile", "/stop_profile", "/v1/stop_profile")
KNOBS = ("prefix", "delay", "max")
PREFIX_MAX = 64
_PREFIX_CHARS = set(string.ascii_letters + string.digits + "-_.")
# The key our knobs travel under in the relayed signal's payload (other payloads are upstream's).
PAYLOAD_KEY = "mindspeed_prof"

# The most units a start may skip or record: the recorder numbers units up to 2**31 - 1 (its
# open-ended mark), and a window past that could never open nor end. A billion units is days
# of engine steps at any speed.
UNIT_LIMIT = 10**9
# A window started over HTTP with no 'max' and no --profile-max-gb: each rank stops it once it
# wrote this much in it.
DEFAULT_WINDOW_GB = 2.0
TOKEN_HEADER = "Authorization"
# The most bytes a request's body may hold (a start's is a small JSON object): 413 past it, so
# a client cannot make a server's front end hold or parse an unbounded body.
BODY_LIMIT = 1 << 20
_EXAMPLE = "{\"prefix\": \"decode\", \"delay\": 2, \"max\": 5}"

# WindowControl's shared slots
_OPEN, _GENERATION, _BUSY_BY_FLAGS, _LAST, _LAST_HOW = range(5)
# How the window in _LAST ended by itself: after its 'max' units, or on rank 0 before its length
# or a stop (its budget, or the recorder closing there; rank 0's manifest says which).
_BY_MAX, _ON_RANK_0 = 1, 2


class BadRequest(ValueError):
    """A start body the route refuses (400), with the reason and the fix."""


def engine_defaults(config: Any) -> Tuple[int, int]:
    """(delay, max) of a start whose body does not say: ``--profile-forwards A-B`` (engine
    steps A..B of the window), else record from the next step until ``/stop_profile``."""
    if config.profile_forwards:
        first, last = config.profile_forwards[0]
        return first - 1, last - first + 1
    return 0, 0


def body_too_large(length: Optional[int]) -> str:
    """The 413's words for a body past ``BODY_LIMIT`` (``length``: its size, when sent)."""
    size = f"{length} bytes" if length is not None else f"more than {BODY_LIMIT} bytes"
    return (f"the body is {size}; the profile routes take at most {BODY_LIMIT} bytes (a start "
            f"is a small JSON object such as {_EXAMPLE}; a stop needs no body)")


def read_body(data: bytes) -> Any:
    """A start's body as JSON (``{}`` when empty); ``BadRequest`` saying what it is instead."""
    if not data.strip():
        return {}
    try:
        body = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise BadRequest(f"the body nests arrays or objects deeper than the parser follows; a "
                         f"start is one flat JSON object such as {_EXAMPLE}") from None
    except ValueError:  # not JSON, or not UTF-8
        raise BadRequest(f"the body is not JSON; send a JSON object such as {_EXAMPLE}, or "
                         f"none") from None
    if body is None:
        raise BadRequest(f"the body is JSON null, not an object; send a JSON object such as "
                         f"{_EXAMPLE}, or no body for the defaults")
    return body


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
    meaning = "units to skip before recording" if key == "delay" else \
        "units to record, then stop (0: until /stop_profile)"
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(f"{key!r} must be an integer >= 0 ({meaning}), not {value!r}")
    if value > UNIT_LIMIT:
        raise BadRequest(f"{key!r} {value} is past what a window can reach: at most "
                         f"{UNIT_LIMIT} ({meaning})")
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
    why = layout.reserved_name(prefix)
    if why:
        raise BadRequest(f"'prefix' {prefix!r} cannot name a window's folder: {why}; choose "
                         f"another name, e.g. \"decode\"")
    return prefix


def prefix_refusal(request: WindowRequest, save_path: str) -> Optional[str]:
    """Why the folder ``request.prefix`` names under ``save_path`` cannot hold a window (it
    exists and is no folder, or is a link that may lead out of the save path), else None."""
    if not request.prefix:
        return None
    path = os.path.join(save_path, request.prefix)
    if os.path.islink(path):
        return (f"'prefix' {request.prefix!r} names a symbolic link in --profile-save-path "
                f"{save_path}; a window's folder is a real folder there: choose another name")
    if os.path.lexists(path) and not os.path.isdir(path):
        return (f"'prefix' {request.prefix!r} names a file that exists in --profile-save-path "
                f"{save_path} (not a folder): the window could not be written there; choose "
                f"another name")
    return None


def _loopback(address: Optional[str]) -> bool:
    try:
        ip = ipaddress.ip_address((address or "").split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def refusal(config: Any, remote_addr: Optional[str], authorization: Optional[str]
            ) -> Optional[Tuple[int, str]]:
    """(status, why) when the caller may not use the profile routes, else None (DESIGN §7).

    Loopback callers only, unless ``--profile-http-allow-remote``; with
    ``--profile-http-token`` every caller (loopback included: other users of the machine
    reach it too) sends ``Authorization: Bearer <token>``."""
    token = getattr(config, "profile_http_token", None)
    allow_remote = bool(getattr(config, "profile_http_allow_remote", False))
    if not allow_remote and not _loopback(remote_addr):
        return 403, (f"the profile routes answer only callers on this machine (127.0.0.1, "
                     f"::1), not {remote_addr or 'an unknown address'}: they write profiles to "
                     f"disk on request. To start windows from another host, start the server "
                     f"with --profile-http-allow-remote (or MINDSPEED_PROF_HTTP_ALLOW_REMOTE=1) "
                     f"and a shared --profile-http-token (or MINDSPEED_PROF_HTTP_TOKEN), and "
                     f"send the header '{TOKEN_HEADER}: Bearer <token>'")
    if token:
        scheme, _, sent = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
                sent.strip().encode("utf-8", "surrogateescape"),
                token.encode("utf-8", "surrogateescape")):
            return 401, (f"this server's profile routes need its shared token: send the header "
                         f"'{TOKEN_HEADER}: Bearer <token>' with the value of its "
                         f"--profile-http-token (MINDSPEED_PROF_HTTP_TOKEN)")
    return None


def default_budget_gb(config: Any, request: WindowRequest) -> Optional[float]:
    """The per-rank byte budget (GB) of a window ``request`` opens: ``DEFAULT_WINDOW_GB`` for
    one started over HTTP with no length when ``--profile-max-gb`` is not given, else None
    (the job's budget, if any, applies as to every window)."""
    if request.by != "http" or request.length or config.profile_max_gb is not None:
        return None
    return DEFAULT_WINDOW_GB


class WindowBudget(RankBudget):
    """One window's own budget on one rank (``default_budget_gb``): the bytes it wrote, counted
    from what the rank had written when it was asked for (``used_before``)."""

    def __init__(self, config: Any, backend: str, limit_gb: float, used_before: int) -> None:
        super().__init__(config, backend, [0])
        self.limit_gb, self._before = limit_gb, used_before
        self._judged = 0  # units of a running session judged so far (crossed's calls)

    @property
    def share(self) -> float:
        return self.limit_gb * GB

    def allows(self, schedule: Any, used: int) -> bool:
        if schedule.end is None:
            return True
        need = estimate(self.config, self.backend, iterations=schedule.active, ranks=1)[0]
        return used - self._before + need <= self.share

    def crossed(self, used: int, running: Any = ()) -> bool:
        """Judged after each unit of a running session that did not end it. torch writes its
        trace only at the stop (and holds it in memory until then): while nothing of the
        session is on disk, the estimate of the units it recorded stands for its bytes."""
        self._judged += 1
        written = used_bytes(running) if running else 0
        if not written:
            written = estimate(self.config, self.backend, iterations=self._judged, ranks=1)[0]
        return used - self._before + written > self.share

    def skip_reason(self, unit: Any, schedule: Any) -> str:
        return (f"the window started over HTTP with no 'max' stops before {unit.name} "
                f"{schedule.start}: it wrote its default budget of {self.limit_gb:g} GB on this "
                f"rank (give 'max' in the start, or --profile-max-gb, to choose)")

    def stop_reason(self, unit: Any, last_recorded: int) -> str:
        return (f"stopping the window started over HTTP with no 'max' after {unit.name} "
                f"{last_recorded}: it wrote its default budget of {self.limit_gb:g} GB on this "
                f"rank (give 'max' in the start, or --profile-max-gb, to choose)")


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
        self._slots = context.Array(ctypes.c_longlong, 5)
        self._expected_last: Optional[Tuple[int, int]] = None  # rank 0: (generation, unit)
        self._taken_here: Optional[int] = None  # rank 0 records this generation itself

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
                return None, f"no window started over HTTP is running{self._ended()}"
            slots[_OPEN] = 0
            return int(slots[_GENERATION]), ""

    def _ended(self) -> str:
        slots = self._slots
        if not slots[_LAST] or slots[_LAST] != slots[_GENERATION]:
            return ""
        if slots[_LAST_HOW] == _ON_RANK_0:
            return (f"; window {slots[_GENERATION]} ended on rank 0 before a stop: it wrote its "
                    f"budget there, or the recorder closed (rank 0's manifest says which)")
        return f"; window {slots[_GENERATION]} ended by itself after its 'max' units"

    def _close(self, generation: int, how: int) -> None:
        with self._slots.get_lock():
            if self._slots[_OPEN] and self._slots[_GENERATION] == generation:
                self._slots[_OPEN], self._slots[_LAST] = 0, generation
                self._slots[_LAST_HOW] = how

    @property
    def open(self) -> bool:
        return bool(self._slots[_OPEN])

    # -- the engine's rank 0 ---------------------------------------------------------------------

    def started(self, generation: Optional[int], asked_before: int, request: WindowRequest,
                taken_here: bool = False) -> None:
        """The start reached rank 0 before unit ``asked_before``: a window with a length ends
        by itself after unit ``asked_before + delay + max - 1``. ``taken_here``: rank 0 records
        it itself, so its end there (``unit_ended``'s ``asked_pending``) is the window's."""
        if generation is None:
            return
        self._taken_here = generation if taken_here else None
        if request.length:
            self._expected_last = (generation,
                                   asked_before + request.delay + request.length - 1)

    def answered(self, generation: Optional[int], answer: str, asked_before: int,
                 request: WindowRequest) -> None:
        """Rank 0's driver answered the start (``start_window``'s answer): "busy" refuses it,
        anything else starts it, recorded on rank 0 unless the answer says it is not."""
        if answer == "busy":
            self.refused(generation)
        else:
            self.started(generation, asked_before, request,
                         taken_here=answer != "not recorded here")

    def unit_ended(self, n: int, asked_pending: Optional[bool] = None) -> None:
        """Rank 0 ended unit ``n``: a window whose length is reached closes here, and one rank 0
        records closes once its recorder no longer holds it (``asked_pending`` False: stopped
        at its budget, or the recorder closed), so that a start is not refused, nor a stop
        taken, for a window that records nothing any more."""
        expected = self._expected_last
        if expected is not None and n >= expected[1]:
            self._expected_last = None
            self._close(expected[0], _BY_MAX)
        taken = self._taken_here
        if taken is not None and asked_pending is False:
            self._taken_here = None
            self._close(taken, _ON_RANK_0)

    def refused(self, generation: Optional[int]) -> None:
        """Rank 0 could not take the window (one from the flags ran): the routes know."""
        self._expected_last = self._taken_here = None
        with self._slots.get_lock():
            if generation is not None and self._slots[_GENERATION] == generation:
                self._slots[_OPEN] = 0

    def flags_window(self, running: bool) -> None:
        """Rank 0's window from the flags (or the trigger) began or ended."""
        self._slots[_BUSY_BY_FLAGS] = 1 if running else 0
