"""`mindspeed-prof analyse`: torch_npu's offline parser on unparsed captures, then check."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from output_fixtures import samples

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TESTS = os.path.join(REPO, "tests")

# A stand-in torch_npu whose analyse() does what the real one leaves behind: a parsed
# ASCEND_PROFILER_OUTPUT (copied from the real sample) and a record of the call.
STAND_IN = '''
import json, os, shutil
SAMPLE = {sample!r}

def analyse(profiler_path, max_process_number=1, export_type=None):
    with open(os.path.join({log_dir!r}, "calls.jsonl"), "a") as log:
        log.write(json.dumps({{"path": profiler_path, "export_type": export_type}}) + "\\n")
    out = os.path.join(profiler_path, "ASCEND_PROFILER_OUTPUT")
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(SAMPLE, out)
'''


def run_cli(args, pythonpath, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_TORCH_NPU")}
    env["PYTHONPATH"] = os.pathsep.join([*pythonpath, REPO])
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "mindspeed_prof.cli", *args], env=env,
                          capture_output=True, text=True, timeout=300, cwd=REPO)


@pytest.fixture
def stand_in(tmp_path):
    """(directory to put on PYTHONPATH, file listing analyse() calls)."""
    root = tmp_path / "stand_in"
    package = root / "torch_npu" / "profiler"
    package.mkdir(parents=True)
    (root / "torch_npu" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    parsed = tmp_path / "parsed_sample"
    samples.npu_capture(parsed, 0)
    sample_out = os.path.join(parsed, samples.run_name(0), samples.OUTPUT)
    (package / "profiler.py").write_text(textwrap.dedent(STAND_IN.format(
        sample=sample_out, log_dir=str(root))))
    return str(root), root / "calls.jsonl"


def calls(log):
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_without_torch_npu_analyse_exits_2_and_says_how_to_fix_the_environment(tmp_path):
    samples.npu_capture(tmp_path / "prof", 0, parsed=False, raw=True)
    result = run_cli(["analyse", str(tmp_path / "prof")], pythonpath=[])
    assert result.returncode == 2, result.stderr
    assert "torch_npu" in result.stderr and "set_env.sh" in result.stderr
    assert "Traceback" not in result.stderr


def test_unparsed_captures_are_parsed_then_checked(tmp_path, stand_in):
    path, log = stand_in
    prof = tmp_path / "prof"
    samples.npu_capture(prof, 0, parsed=False, raw=True)
    samples.npu_capture(prof, 1, raw=True)  # parsed already: left alone
    result = run_cli(["analyse", str(prof), "--json"], pythonpath=[path])
    assert result.returncode == 0, result.stdout + result.stderr
    assert [os.path.basename(c["path"]) for c in calls(log)] == [samples.run_name(0)]
    report = json.loads(result.stdout)
    assert [r["verdict"] for r in report["ranks"]] == ["valid", "valid"]


def test_all_reparses_every_capture_and_passes_the_export_type(tmp_path, stand_in):
    path, log = stand_in
    prof = tmp_path / "prof"
    samples.npu_capture(prof, 0, raw=True)
    samples.npu_capture(prof, 1, raw=True)
    result = run_cli(["analyse", str(prof), "--all", "--export-type", "text"], pythonpath=[path])
    assert result.returncode == 0, result.stderr
    assert sorted(os.path.basename(c["path"]) for c in calls(log)) == [
        samples.run_name(0), samples.run_name(1)]
    assert {tuple(c["export_type"]) for c in calls(log)} == {("text",)}


def test_captures_that_never_stopped_are_skipped_and_fail_the_check(tmp_path, stand_in):
    path, log = stand_in
    prof = tmp_path / "prof"
    samples.npu_capture(prof, 0, info=None, parsed=False, raw=True)
    result = run_cli(["analyse", str(prof)], pythonpath=[path])
    assert result.returncode == 1 and calls(log) == []
    assert "never stopped" in result.stderr and "not stopped" in result.stdout


def test_missing_directory_is_a_usage_error(tmp_path, stand_in):
    result = run_cli(["analyse", str(tmp_path / "nope")], pythonpath=[stand_in[0]])
    assert result.returncode == 2 and "nope" in result.stderr


@pytest.mark.slow  # the fake torch_npu's parser in child interpreters
def test_fake_torch_npu_offline_capture_is_parsed_end_to_end(tmp_path):
    if not os.path.isfile(os.path.join(TESTS, "fakes", "loader.py")):
        pytest.skip("the fake torch_npu (tests/fakes) is not in this checkout")
    prof = tmp_path / "prof"
    record = textwrap.dedent(f"""
        import torch
        from mindspeed_prof import ProfilerConfig, profile
        config = ProfilerConfig(profile=True, profile_step_start=2, profile_step_end=4,
                                profile_save_path={str(prof)!r}, profile_backend="npu",
                                profile_level="level1", profile_analyse="offline",
                                profile_with_cpu=True)
        model = torch.nn.Linear(8, 8)
        with profile(config, train_iters=5, first_iteration=1, rank=0, world_size=1) as p:
            for _ in range(5):
                model(torch.randn(2, 8)).sum().backward()
                p.step()
    """)
    fakes = os.path.join(TESTS, "fakes")
    env = {"FAKE_TORCH_NPU_VERSION": "2.14.0", "RANK": "0"}
    path = f"{fakes}{os.pathsep}{REPO}"
    recorded = subprocess.run([sys.executable, "-c", record], capture_output=True, text=True,
                              timeout=300, cwd=REPO, env={**os.environ, **env, "PYTHONPATH": path})
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    before = run_cli(["check", str(prof), "--json"], pythonpath=[fakes], env_extra=env)
    assert before.returncode == 1
    assert json.loads(before.stdout)["ranks"][0]["verdict"] == "unparsed"
    result = run_cli(["analyse", str(prof), "--json"], pythonpath=[fakes], env_extra=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert json.loads(result.stdout)["ranks"][0]["verdict"] == "valid"
