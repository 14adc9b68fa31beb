"""A source of run-time windows is one row of config/polled.py and one part of the poll's one
exchange (control/poll_exchange.PollPart): a fourth source, added here as a row through
monkeypatch, is exchanged with the others and its window enters through request_window on every
rank at the same unit, with no place in the trigger's and the capture rules' part."""

import json
import sys
import types

import pytest
import torch.distributed as dist

import mindspeed_prof
from mindspeed_prof import ProfilerConfig
from mindspeed_prof.config import polled
from mindspeed_prof.config.window import StepSchedule, WindowRequest
from mindspeed_prof.control import exchange
from mindspeed_prof.recording.recorder import WindowRecorder

from helpers.traces import manifest

SEEN_AT = 4  # the unit whose poll rank 1's toy source sees its event at


class BellPart:
    """A toy fourth source: a bell that rank 1 alone hears; every rank records the two units
    after the poll that shared it."""

    name = "the bell"
    gathers = True  # rank 1 hears it: every rank's entry is needed
    done = False

    def __init__(self, plan, report):
        self.rank = plan.rank

    def contribute(self, n, mine):
        mine["bell"] = {"n": n, "rang": self.rank == 1 and n == SEEN_AT}

    def agreed(self, n, shared):
        if not any((row or {}).get("bell", {}).get("rang") for row in shared):
            return None
        return WindowRequest(by="bell", sessions=(StepSchedule(skip_first=n, warmup=0,
                                                               active=2),))


class TwoRanks:
    """torch.distributed as rank ``rank`` of a two-rank job sees it: the other rank's row of an
    all-gather is what its own BellPart would send at the same poll."""

    def __init__(self, monkeypatch, rank):
        self.rank, self.gathers = rank, 0
        monkeypatch.setattr(dist, "is_initialized", lambda: True)
        monkeypatch.setattr(dist, "get_backend", lambda group=None: "gloo")
        monkeypatch.setattr(dist, "get_rank", lambda group=None: rank)
        monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
        monkeypatch.setattr(dist, "all_gather", self.all_gather)

    def all_gather(self, rows, tensor, group=None, async_op=False):
        import torch

        self.gathers += 1
        raw = tensor.cpu().numpy().tobytes()
        mine = json.loads(raw[4:4 + exchange._length(raw)])
        n = mine["bell"]["n"]
        other = {"bell": {"n": n, "rang": 1 - self.rank == 1 and n == SEEN_AT}}
        rows[self.rank].copy_(tensor)
        rows[1 - self.rank].copy_(exchange._pack(torch, exchange._encode(other), tensor.numel(),
                                                 tensor.device))


@pytest.fixture
def bell(monkeypatch):
    module = types.ModuleType("bell_source")
    module.BellPart = BellPart
    monkeypatch.setitem(sys.modules, "bell_source", module)
    row = polled.PolledSource("the bell", lambda config: True, instead_of_every=False,
                              part="bell_source:BellPart")
    monkeypatch.setattr(polled, "SOURCES", polled.SOURCES + (row,))
    asked = []
    door = WindowRecorder.request_window

    def request_window(recorder, n, request):
        asked.append((recorder.rank, n, request.by))
        return door(recorder, n, request)

    monkeypatch.setattr(WindowRecorder, "request_window", request_window)
    return asked


@pytest.mark.parametrize("rank", [0, 1])
def test_a_fourth_source_added_as_a_row_opens_its_window_through_the_one_door_on_every_rank(
        tmp_path, monkeypatch, bell, rank):
    group = TwoRanks(monkeypatch, rank)
    config = ProfilerConfig(profile=True, profile_backend="torch", profile_ranks="all",
                            profile_save_path=str(tmp_path), profile_trigger_poll=1)
    with mindspeed_prof.profile(config, rank=rank, world_size=2, train_iters=10) as prof:
        for _ in range(10):
            prof.step()
    # the poll ran at every iteration's begin, one all-gather each, and the bell's window
    # entered by request_window before the same iteration on either rank
    assert group.gathers >= 10
    assert bell == [(rank, SEEN_AT, "bell")]
    [window] = manifest(tmp_path, rank)["windows"]
    assert (window["dir"], window["iterations_recorded"]) == ("iter_4-5", [SEEN_AT, SEEN_AT + 1])
    assert window["started_by"] == {"by": "bell"}
    assert window["trigger"] == {"by": "bell", "seen_at": SEEN_AT}

