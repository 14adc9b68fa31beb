"""Allocator snapshots are read by a reader that builds plain values only: a pickle that would
run code is reported corrupt by `check`, `summary` and `memory`, and the code never runs."""

import json
import os
import pickle

import pytest

from helpers.cli import run_cli
from mindspeed_prof.output.read.errors import CorruptFile
from mindspeed_prof.output.read.snapshot import load_snapshot, loads_plain
from mindspeed_prof.output.memory.summary import BEFORE_HISTORY, device_peak

MiB = 1 << 20


def frames(name, line=10, filename="/work/train.py"):
    return [{"name": name, "filename": filename, "line": line}]


def entry(action, addr, size, where="step"):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "pool_id": (0, 0),
            "frames": frames(where)}


def snapshot(trace, live=(), reserved=None):
    """A torch_npu-shaped snapshot: the blocks still allocated, and the history before."""
    blocks = [{"address": a, "size": s, "requested_size": s, "state": "active_allocated",
               "frames": frames(w)} for a, s, w in live]
    total = reserved if reserved is not None else max(sum(s for _, s, _ in live), 2 * MiB)
    segment = {"device": 0, "address": 0, "total_size": total, "allocated_size": 0,
               "active_size": 0, "requested_size": 0, "stream": 0, "segment_pool_id": (0, 0),
               "segment_type": "large", "is_expandable": False, "frames": [], "blocks": blocks}
    return {"segments": [segment], "device_traces": [list(trace)]}


class RunsCode:
    """Unpickling this calls os.system: what a crafted "snapshot" would do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def crafted_pickles(marker):
    """Pickles that run code when pickle.load reads them, each by another road."""
    reduce_ = pickle.dumps({"segments": [], "device_traces": [[RunsCode(marker)]]})
    # protocol 0 GLOBAL + REDUCE, written out by hand (no STACK_GLOBAL)
    proto0 = f"cos\nsystem\n(Vtouch {marker}\ntR.".encode()
    # INST opcode: builds an instance by calling the named class with the arguments
    inst = f"(Vtouch {marker}\nios\nsystem\n.".encode()
    # EXT2: an extension code that copyreg maps to os.system where it is registered
    ext = b"\x80\x02\x83" + (0xF00D).to_bytes(2, "little") + pickle.dumps(
        f"touch {marker}", protocol=2)[2:-1] + b"\x85R."
    return {"reduce": reduce_, "protocol 0": proto0, "inst": inst, "extension": ext}


@pytest.mark.parametrize("road", ["reduce", "protocol 0", "inst", "extension"])
def test_a_pickle_that_would_run_code_is_refused_and_runs_nothing(tmp_path, road):
    import copyreg
    marker = tmp_path / "code-ran"
    data = crafted_pickles(str(marker))[road]
    if road == "extension":
        copyreg.add_extension("os", "system", 0xF00D)  # as a hostile process might have
    try:
        with pytest.raises(CorruptFile, match="not an allocator snapshot: it names"):
            loads_plain(data)
    finally:
        if road == "extension":
            copyreg.remove_extension("os", "system", 0xF00D)

    assert not marker.exists()


def test_the_crafted_pickles_do_run_code_under_pickle_load(tmp_path):
    # The control: each crafted pickle is a working exploit, so the test above can fail.
    import copyreg
    for road, data in crafted_pickles(str(tmp_path / "ran")).items():
        marker = tmp_path / "ran"
        if road == "extension":
            copyreg.add_extension("os", "system", 0xF00D)
        try:
            pickle.loads(data)
        finally:
            if road == "extension":
                copyreg.remove_extension("os", "system", 0xF00D)
        assert marker.exists(), road
        marker.unlink()


@pytest.mark.parametrize("value, held", [({"segments": [], "device_traces": [], "x": {1, 2}}, "set"),
                                         ({"segments": [], "device_traces": [], "x": b"raw"}, "bytes")])
def test_values_a_snapshot_never_holds_are_corrupt_even_without_a_global(value, held):
    with pytest.raises(CorruptFile, match=f"it holds a {held}"):
        loads_plain(pickle.dumps(value))


def test_a_real_shaped_snapshot_with_tuples_and_cuda_settings_is_read(tmp_path):
    data = snapshot([entry("alloc", 1, MiB)], live=[(1, MiB, "step")])
    data["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                  "garbage_collection_threshold": 0.0, "expandable_segments": False,
                                  "roundup_power2_divisions": {"1": 0}}
    data["external_annotations"] = []
    path = tmp_path / "memory_snapshot_rank0.pickle"
    path.write_bytes(pickle.dumps(data))

    loaded = load_snapshot(str(path))

    assert loaded.data == data and loaded.events == 1
    assert loaded.data["segments"][0]["segment_pool_id"] == (0, 0)


def test_check_summary_and_memory_report_a_crafted_snapshot_corrupt_and_run_nothing(tmp_path, capsys):
    marker = tmp_path / "code-ran"
    save = tmp_path / "prof"
    save.mkdir()
    (save / "memory_snapshot_rank0.pickle").write_bytes(crafted_pickles(str(marker))["reduce"])

    code, out, _ = run_cli(capsys, "check", str(save), "--json")
    (rank,) = json.loads(out)["ranks"]
    assert code == 1 and rank["verdict"] == "corrupt"
    assert any("memory_snapshot_rank0.pickle: not an allocator snapshot: it names posix.system"
               in p for p in rank["problems"]), rank["problems"]
    code, out, _ = run_cli(capsys, "summary", str(save), "--json")
    assert json.loads(out)["memory"][0]["error"].startswith("not an allocator snapshot")
    code, _, err = run_cli(capsys, "memory", str(save), "--html", str(tmp_path / "out.html"))
    assert code == 1 and "not an allocator snapshot" in err
    assert not (tmp_path / "out.html").exists()
    assert not marker.exists()


def test_memory_html_is_torchs_timeline_fed_by_the_restricted_reader(tmp_path, capsys, monkeypatch):
    data = snapshot([entry("alloc", 1, MiB)], live=[(1, MiB, "step")])
    (tmp_path / "memory_snapshot_rank0.pickle").write_bytes(pickle.dumps(data))

    def no_pickle_load(*args, **kwargs):
        raise AssertionError("pickle.load must not read a user's file")

    monkeypatch.setattr(pickle, "load", no_pickle_load)
    monkeypatch.setattr(pickle, "loads", no_pickle_load)
    code, out, _ = run_cli(capsys, "memory", str(tmp_path), "--html", str(tmp_path / "t.html"))

    assert code == 0, out
    page = (tmp_path / "t.html").read_text()
    assert "MemoryViz.js" in page and "Active Memory Timeline" in page
    assert "1.0 MiB" in out


def test_the_peak_counts_what_was_alive_before_the_history_began():
    # 4 MiB alive before the history (still alive at the end), then 2 MiB up and down, 1 MiB kept
    trace = [entry("alloc", 10, 2 * MiB, "forward"), entry("free_requested", 10, 2 * MiB),
             entry("free_completed", 10, 2 * MiB), entry("alloc", 11, MiB, "optimizer")]
    data = snapshot(trace, live=[(1, 4 * MiB, "model"), (11, MiB, "optimizer")], reserved=8 * MiB)

    peak = device_peak(data, 0)

    assert peak.peak_allocated == 6 * MiB and peak.final_allocated == 5 * MiB
    assert peak.peak_event == 0
    assert [(s.site, s.bytes) for s in peak.top_sites] == [
        ("work/train.py:10 model", 4 * MiB), ("work/train.py:10 forward", 2 * MiB)]


def test_blocks_freed_in_the_history_but_allocated_before_it_count_at_the_peak():
    trace = [entry("alloc", 10, 3 * MiB, "forward"), entry("free_requested", 5, 2 * MiB),
             entry("free_requested", 10, 3 * MiB)]
    data = snapshot(trace, live=[])

    peak = device_peak(data, 0)

    # before the history: 2 MiB (freed later); the peak: those 2 MiB plus forward's 3 MiB
    assert peak.peak_allocated == 5 * MiB
    assert {s.site: s.bytes for s in peak.top_sites} == {"work/train.py:10 forward": 3 * MiB,
                                                         BEFORE_HISTORY: 2 * MiB}


def test_torch_frames_are_skipped_to_name_the_allocation_site():
    torch_frame = {"name": "empty", "filename": "/x/site-packages/torch/nn/functional.py", "line": 1}
    trace = [dict(entry("alloc", 1, MiB), frames=[torch_frame] + frames("layer", 42))]

    peak = device_peak(snapshot(trace, live=[(1, MiB, "x")]), 0)

    assert peak.top_sites[0].site == "work/train.py:42 layer"
