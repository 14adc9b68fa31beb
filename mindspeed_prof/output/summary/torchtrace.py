"""Step durations, their breakdown and operator self times from a torch chrome trace.

Self time is an event's duration minus that of its direct children: the complete (``X``)
events of one thread nest like a call tree. Traces list events in no guaranteed order
(torch_npu writes children first, kineto mostly parents first), so each thread's events are
kept in compact arrays (25 bytes each, not Python dicts) and sorted once at the end. The same
arrays give each step's computing / communication / free time (``torchsteps.py``), in the
one pass over the file.
"""

from array import array
from dataclasses import dataclass, field

from .. import cache
from ..read import jsonstream
from ..read.errors import CorruptFile
from ..read.tracescan import STEP_PREFIX, step_number, to_float
from . import collectives, torchsteps

# Annotations and Python frames wrap operators; they are kept as parents but are not operators.
NOT_OPERATORS = ("python_function", "Trace", "user_annotation", "gpu_user_annotation")
# Rounding in float timestamps: a child may seem to end this much after its parent.
NESTING_SLACK_US = 0.01


@dataclass
class TraceSummary:
    events: int = 0
    steps: dict = field(default_factory=dict)  # N -> duration (us)
    ops: dict = field(default_factory=dict)  # name -> [self_us, count, category]
    breakdown: dict = field(default_factory=dict)  # N -> {component: us} (torchsteps.py)
    basis: str = ""  # which events the breakdown counts
    unreadable: int = 0  # complete events whose ts or dur is no finite number: left out
    # each collective's work, in start order: [step, name, group, size, start_us, end_us]
    # (collectives.py says which events; output/waits matches them across ranks)
    collectives: list = field(default_factory=list)
    spans: dict = field(default_factory=dict)  # N -> [start, end] of the step on the CPU

    def as_cached(self):
        return {"events": self.events, "steps": list(self.steps.items()),
                "ops": list(self.ops.items()), "breakdown": list(self.breakdown.items()),
                "basis": self.basis, "unreadable": self.unreadable,
                "collectives": self.collectives, "spans": list(self.spans.items())}

    @classmethod
    def from_cached(cls, hit):
        return cls(events=int(hit["events"]), steps={int(n): dur for n, dur in hit["steps"]},
                   ops={name: list(v) for name, v in hit["ops"]},
                   breakdown={int(n): dict(v) for n, v in hit["breakdown"]},
                   basis=str(hit["basis"]), unreadable=int(hit.get("unreadable", 0)),
                   collectives=[list(c) for c in hit["collectives"]],
                   spans={int(n): list(v) for n, v in hit["spans"]})


class _Thread:
    __slots__ = ("ts", "dur", "name", "kind")

    def __init__(self):
        self.ts, self.dur, self.name = array("d"), array("d"), array("l")
        self.kind = array("b")  # torchsteps' OTHER / CPU_COMPUTE / ... per event


KIND = "torch_summary.3"  # .2: with the collectives; .3: their scopes where no group


def remembered_summary(path):
    """``summarize_trace``, from the cache when it holds this file as it is now."""
    return cache.remembered(path, KIND, summarize_trace, TraceSummary.as_cached,
                            TraceSummary.from_cached, CorruptFile)


def summarize_trace(path):
    """Read the whole trace (streamed); raises ``CorruptFile`` if it is not a complete trace."""
    summary = TraceSummary()
    threads, ids, names, cats, kinds, specials = {}, {}, [], [], [], []
    spans, device_spans = {}, {}  # N -> (ts, dur): the step on the CPU, on the device
    found = collectives.Found()
    for batch in jsonstream.iter_event_batches(path):
        summary.events += len(batch)
        for event in batch:
            if not isinstance(event, dict) or event.get("ph") != "X":
                continue
            name = event.get("name")
            ts, dur = to_float(event.get("ts")), to_float(event.get("dur"))
            if not isinstance(name, str) or ts is None or dur is None or dur < 0:
                if (ts is None and event.get("ts") is not None) \
                        or (dur is None and event.get("dur") is not None):
                    summary.unreadable += 1  # not a finite number (read/numbers.py)
                continue
            if name.startswith(STEP_PREFIX):
                number = step_number(name)
                if number is not None and not str(event.get("cat", "")).startswith("gpu"):
                    summary.steps.setdefault(number, dur)
                    spans.setdefault(number, (ts, dur))
                elif number is not None:  # CUDA repeats each step on the device's timeline
                    device_spans.setdefault(number, (ts, dur))
            key = (event.get("pid"), event.get("tid"))
            thread = threads.get(key)
            if thread is None:
                thread = threads[key] = _Thread()
            name_id = ids.get(name)
            if name_id is None:
                name_id = ids[name] = len(names)
                names.append(name)
                cats.append(str(event.get("cat", "")))
                # by the name's first category, as its operator is: a name that changes
                # category is a CUDA step annotation's (kind OTHER either way)
                kinds.append(torchsteps.kind_of(name, cats[-1]))
                # a collective, or a range whose collectives are one group's (collectives.py,
                # on the host): one test per event picks both out
                scope = None if cats[-1].startswith("gpu") else collectives.scope_of(name)
                specials.append(kinds[-1] if kinds[-1] in collectives.KINDS else scope)
            thread.ts.append(ts)
            thread.dur.append(dur)
            thread.name.append(name_id)
            thread.kind.append(kinds[name_id])
            special = specials[name_id]
            if special is not None:
                if special in collectives.KINDS:
                    found.add(event, name, special, key, ts, dur)
                else:
                    found.scope(special, ts, dur)
    totals = array("d", bytes(8 * len(names)))
    counts = array("l", bytes(array("l").itemsize * len(names)))
    for thread in threads.values():
        _self_times(thread, totals, counts)
    for name_id, name in enumerate(names):
        if name.startswith(STEP_PREFIX) or cats[name_id] in NOT_OPERATORS:
            continue
        summary.ops[name] = [totals[name_id], counts[name_id], cats[name_id]]
    summary.collectives = found.ordered(spans, device_spans)
    summary.spans = {n: [ts, ts + dur] for n, (ts, dur) in spans.items()}
    if spans:
        summary.basis, summary.breakdown = torchsteps.breakdown(threads.values(), spans,
                                                                device_spans)
    return summary


def _self_times(thread, totals, counts):
    ts, dur, name = thread.ts, thread.dur, thread.name
    order = sorted(range(len(ts)), key=dur.__getitem__, reverse=True)
    order.sort(key=ts.__getitem__)  # stable: at equal start the longer event is the parent
    children = array("d", bytes(8 * len(ts)))
    stack = []  # (end, index) of the open ancestors
    for i in order:
        start, end = ts[i], ts[i] + dur[i]
        while stack and stack[-1][0] <= start + NESTING_SLACK_US:
            _close(stack.pop()[1], dur, children, name, totals, counts)
        if stack and end <= stack[-1][0] + NESTING_SLACK_US:
            children[stack[-1][1]] += dur[i]
        stack.append((end, i))
    while stack:
        _close(stack.pop()[1], dur, children, name, totals, counts)


def _close(i, dur, children, name, totals, counts):
    totals[name[i]] += max(dur[i] - children[i], 0.0)
    counts[name[i]] += 1
