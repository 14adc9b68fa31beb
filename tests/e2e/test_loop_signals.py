"""The plain-loop API shares the training's flush-on-signal: a SIGTERM or SIGINT sent to the whole
process group of a loop that reads through DataLoader worker processes keeps the trace, and the
manifest says the window was cut and what reached the process while it flushed."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from helpers.cli import rank_entry, run_cli_json
from helpers.traces import manifest, step_ids, torch_traces

pytestmark = pytest.mark.e2e

# The loop starts with Python's own SIGINT handler, as a script started from a terminal does: a
# shell that runs pytest in the background without job control (`cmd &` in a script, nohup-style
# jobs) hands its children SIGINT ignored, an ignore the product rightly keeps (issue 35).
LOOP = textwrap.dedent("""
    import signal, sys, time, torch
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import mindspeed_prof

    class Numbers(torch.utils.data.Dataset):
        def __len__(self):
            return 10_000
        def __getitem__(self, i):
            return torch.full((8,), float(i))

    config = mindspeed_prof.ProfilerConfig(
        profile=True, profile_step_start=3, profile_step_end=-1, profile_save_path=sys.argv[1],
        profile_backend="torch", profile_ranks=[0])
    loader = iter(torch.utils.data.DataLoader(Numbers(), batch_size=4, num_workers=2,
                                              persistent_workers=True))
    with mindspeed_prof.profile(config, rank=0, world_size=1) as prof:
        for iteration in range(1, 1000):
            batch = next(loader)
            (batch @ batch.T).sum()
            if iteration == 5:
                print("in iteration 5", flush=True)
                time.sleep(60)  # the job is stopped here
            prof.step()
""")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_loops_process_group_keeps_the_trace_and_says_cut(tmp_path, capsys,
                                                                          signum):
    save = tmp_path / "prof"
    loop = subprocess.Popen([sys.executable, "-c", LOOP, str(save)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while loop.stdout.readline().strip() != "in iteration 5":
            assert time.monotonic() < deadline and loop.poll() is None, loop.stderr.read()
        time.sleep(0.5)
        os.killpg(loop.pid, signum)  # the loop and its DataLoader workers, as Ctrl-C or `timeout`
        _, err = loop.communicate(timeout=60)
    finally:
        if loop.poll() is None:
            os.killpg(loop.pid, signal.SIGKILL)
    assert loop.returncode == -signum, err
    data = manifest(save, 0)
    assert data["errors"] == [], data["errors"]
    assert data["status"] == "cut"
    window = data["windows"][0]
    assert window["iterations_recorded"] == [3, 4]
    assert window["cut"]["in_progress"] == 5
    assert step_ids(torch_traces(save)[0]) == [3, 4, 5]
    if signum == signal.SIGTERM:
        assert data["exit"] == {"reason": "signal", "detail": "SIGTERM"}
    else:
        assert data["exit"]["reason"] == "interrupted"
    capsys.readouterr()
    code, report = run_cli_json(capsys, "check", save)
    assert code == 1 and rank_entry(report, 0)["verdict"] == "cut"
    assert json.dumps(report).count("cut short") >= 1
