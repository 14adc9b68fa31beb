"""``summary`` and ``check`` on the req_ layout: per request latency, forwards and top operators,
from captures the request driver wrote (torch backend and the torch_npu double)."""

from helpers.cli import run_cli
from helpers.npu import fake_npu_fixture
from mindspeed_prof.output.render.summary import summary_csv, summary_table
from mindspeed_prof.output.summary.directory import summarize_directory
from mindspeed_prof.recording.recorder import WindowRecorder
from mindspeed_prof.config.units import REQUEST
from helpers.inference import armed, config, serve, work


def test_every_request_gets_its_latency_forwards_and_top_operators(tmp_path):
    driver = armed(config(tmp_path))
    serve(driver, 4, on_new_threads=True)
    driver.close()
    (rank,) = summarize_directory(str(tmp_path / "prof")).ranks
    assert [r["request"] for r in rank.requests] == [2, 3]
    steps = {s["step"]: s["step_time"] for s in rank.steps}
    for row in rank.requests:
        assert (row["forwards"], row["prefill"], row["decode"]) == (4, 1, 3)
        assert row["latency_us"] == steps[row["request"]] > 0
        assert len(row["top_ops"]) == 3
        assert row["top_ops_of"] == "request"


def test_table_and_csv_list_one_line_per_request(tmp_path):
    driver = armed(config(tmp_path))
    serve(driver, 3)
    driver.close()
    summary = summarize_directory(str(tmp_path / "prof"))
    table = summary_table(summary)
    assert "Requests (inference: latency, forwards and top operators per request)" in table
    section = table.split("Requests (")[1].split("\n\n")[0].splitlines()
    assert [line.split()[:6] for line in section[2:]] == [["0", "2", line_latency(summary, 2), "4", "1", "3"],
         ["0", "3", line_latency(summary, 3), "4", "1", "3"]]
    rows = [line for line in summary_csv(summary).splitlines() if line.startswith("request,")]
    assert "request,0,2,,,prefill,1" in rows and "request,0,3,,,decode,3" in rows


def line_latency(summary, request):
    row = next(r for r in summary.ranks[0].requests if r["request"] == request)
    return f"{row['latency_us'] / 1000:.2f}"


def test_a_capture_holding_two_requests_splits_forwards_by_request(tmp_path):
    recorder = WindowRecorder(config(tmp_path, profile_steps="2-3"), unit=REQUEST)
    recorder.arm(first=1)
    for n in range(1, 5):
        recorder.begin(n)
        for position in range(n):  # request n runs n forwards
            with recorder.range("prefill" if position == 0 else "decode"):
                work()
        recorder.end(n)
    recorder.close()
    rows = summarize_directory(str(tmp_path / "prof")).ranks[0].requests
    assert [(r["request"], r["prefill"], r["decode"], r["top_ops_of"]) for r in rows] == \
        [(2, 1, 1, "capture"), (3, 1, 2, "capture")]


def test_a_training_profile_has_no_request_rows(tmp_path):
    recorder = WindowRecorder(config(tmp_path, profile_steps="2-3"))
    recorder.arm(first=1, last=4)
    for n in range(1, 5):
        recorder.begin(n)
        work()
        recorder.end(n)
    recorder.close()
    summary = summarize_directory(str(tmp_path / "prof"))
    assert summary.ranks[0].steps and summary.ranks[0].requests == []
    assert "Requests (" not in summary_table(summary)


def test_check_passes_a_server_profile_in_req_folders(tmp_path, capsys):
    driver = armed(config(tmp_path))
    serve(driver, 4, on_new_threads=True)
    driver.close()
    code, out, _ = run_cli(capsys, "check", tmp_path / "prof")
    assert code == 0, out
    assert "req_2-2/" in out and "req_3-3/" in out


fake_npu = fake_npu_fixture("2.14.0")


def test_npu_request_rows_come_from_each_request_capture(tmp_path, fake_npu):
    driver = armed(config(tmp_path, profile_backend="npu", profile_level="level1",
                          profile_with_cpu=True))
    serve(driver, 4)
    driver.close()
    (rank,) = summarize_directory(str(tmp_path / "prof")).ranks
    assert sorted({r["request"] for r in rank.requests}) == [2, 3]
    assert all(r["latency_us"] and r["top_ops"] for r in rank.requests)
    assert all(r["source"].startswith(f"req_{r['request']}-{r['request']}/rank0_req")
               for r in rank.requests)
