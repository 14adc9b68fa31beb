"""Shared test set-up: the tests/ folder is importable (harness, fakes), patches are undone after
each test, and the environment a test sees carries no profiling switches of the developer's."""

import os
import sys

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)


CURRENT_MEGATRON = (0, 17)


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: slow: torchrun jobs with real megatron-core, the benchmark smoke run")
    config.addinivalue_line(
        "markers", "slow: a unit test that starts other interpreters (subprocesses, spawned ranks, "
                   "gloo or torchrun jobs) or runs mypy; `-m \"not e2e and not slow\"` is the loop "
                   "to run between edits, CI runs them all")
    config.addinivalue_line(
        "markers", "current_leg: what the Python 3.12 leg runs (scripts/test_current_megatron.sh): "
                   "every current_megatron test and the files in CURRENT_LEG_FILES")
    config.addinivalue_line(
        "markers", "current_megatron: needs megatron-core >= 0.17 (Python >= 3.12); skipped "
                   "elsewhere, run by scripts/test_current_megatron.sh")


def installed_megatron_core():
    """The installed megatron-core's (major, minor), or None (metadata only: no import)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return tuple(int(part) for part in version("megatron-core").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return None


# The unit tests marked `slow` (see pytest_configure): a file, a file::test (each of its
# parameters), or file@fixture (each test of the file that uses that fixture: a module-scoped job).
# Found with --durations: together most of `-m "not e2e"`'s time.
SLOW_UNIT_TESTS = (
    "unit/patches/test_inference_patches.py",  # Megatron's engines in a fresh interpreter, test by test
    "unit/patches/test_megatron_rl_shutdown.py",
    "unit/project/test_layering.py",  # fresh interpreters, to see what each import loads
    "unit/project/test_typecheck.py",  # mypy
    "unit/drivers/test_cut_units.py::test_a_request_window_a_server_never_completes_is_cut",
    "unit/drivers/test_cut_units.py::test_a_role_resumed_inside_its_window_records_the_steps_that_run",
    "unit/drivers/test_cut_units.py::test_a_window_cut_in_its_first_step_names_the_partial_trace_it_wrote",
    "unit/drivers/test_cut_units.py::test_an_rl_process_killed_inside_its_window_is_cut_not_valid",
    "unit/drivers/test_cut_units.py::test_an_rl_window_ended_early_is_cut_and_keeps_the_steps_it_recorded",
    "unit/arguments/test_bad_input.py::test_every_invalid_flag_combination_exits_2_naming_the_flag_and_the_fix",
    "unit/arguments/test_bad_input.py::test_every_invalid_yaml_file_exits_2_naming_the_key_and_the_fix",
    "unit/arguments/test_bad_input.py::test_training_with_an_invalid_flag_exits_2_with_one_clear_message",
    "unit/recording/test_two_runs.py@two_jobs",
    "unit/recording/test_two_runs.py@fewer_ranks",
    "unit/recording/test_two_runs.py::test_two_torchrun_jobs_in_one_slurm_allocation_without_srun_are_two_runs",
    "unit/commands/test_adapt_script_checks.py::test_the_exit_error_of_a_launched_script_that_ran_no_hooked_loop_names_what_ran",
    "unit/test_exits.py::test_a_child_killed_during_the_final_flush_is_noted_and_does_not_abort_it",
    "unit/test_exits.py::test_sigterm_after_close_waits_for_the_export_still_running_then_dies_of_sigterm",
    "unit/test_exits.py::test_sigterm_while_the_last_step_of_a_window_saves_its_trace_keeps_the_trace",
    "unit/test_exits.py::test_sigterm_landing_where_the_loop_holds_a_lock_the_flush_takes_still_ends_the_process",
    "unit/test_exits.py::test_sigterm_landing_while_a_second_role_claims_its_manifest_ends_the_process",
    "unit/test_exits.py::test_a_sigterm_whose_host_handler_returns_lets_the_plain_loop_run_on",
    "unit/test_exits.py::test_a_process_that_ignores_sigterm_keeps_profiling_through_one",
    "unit/test_exits.py::test_sigterm_behind_a_manifest_write_that_never_returns_ends_the_process_at_its_deadline",
    "unit/test_full_disk.py",  # a child interpreter on a small tmpfs
    "unit/commands/test_analyse_command.py::test_fake_torch_npu_offline_capture_is_parsed_end_to_end",
    "unit/output/summary/test_torch_breakdown.py@gloo_job",
    "unit/project/test_docs.py@gloo_job",
    "unit/drivers/test_role_profiler.py::test_exit_inside_a_step_writes_the_trace_and_a_final_manifest_that_says_cut",
    "unit/output/job/test_node_reports.py::test_nodes_as_separate_processes_merge_to_the_single_machine_verdict",
    "unit/control/test_exchange.py@results",
    "unit/test_show_config.py::test_a_closed_pipe_ends_the_command_quietly",
    "unit/toplevel/test_autoload.py::test_pth_line_arms_the_patches_when_profile_is_on_the_command_line",
    "unit/output/whatif/test_whatif_artifact.py::test_the_artifact_s_analyzer_runs_unchanged_on_our_export_and_agrees",
    "unit/test_hostile_analysis.py::test_a_signal_while_timeline_writes_removes_its_temporary_files",
)


def is_slow_unit_test(item):
    path = os.path.relpath(str(item.path), TESTS).replace(os.sep, "/")
    name = getattr(item, "originalname", item.name)
    return any(entry in (path, f"{path}::{name}")
               or (entry.startswith(path + "@") and entry.split("@", 1)[1] in item.fixturenames)
               for entry in SLOW_UNIT_TESTS)


# The e2e files whose assertions lean on time: a straggler or jitter judged against the other
# steps, a signal sent once every rank reached an iteration, a slow export against a timeout.
# With workers they run one after the other on one worker (TIMED_GROUP): never two of them at
# once, each beside whatever the other worker runs (as on a developer's busy machine). Every
# other file, e2e or unit, is a group of its own.
TIMED_E2E_FILES = (
    "tests/e2e/test_captures_torchrun.py",
    "tests/e2e/test_capture_examples.py",
    "tests/e2e/test_real_megatron_captures.py",
    "tests/e2e/test_no_hang.py",
    "tests/e2e/test_exit_paths.py",
    "tests/e2e/test_loop_signals.py",
)
TIMED_GROUP = "e2e-timed"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With workers (pytest.ini: -n 2), each worker takes a whole file at a time, so that a
    file's module-scoped job runs once, and the timed e2e files (TIMED_E2E_FILES) one after the
    other as one group. Two torchrun jobs may run side by side: a job leaves a core idle for a
    third of its time (agent start-up, rendezvous, the readers after it), which the other worker
    fills. (pytest-xdist's own xdist_group marks do not group under pytest 9.2, whose node ids
    no longer read the attribute xdist appends the group to.)"""
    from xdist.scheduler import LoadScopeScheduling

    class FilesAndTheTimedGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return worker_scope(nodeid)

    return FilesAndTheTimedGroup(config, log)


def longest_first(items):
    """The items in the order workers should take their groups: the timed group (the longest),
    then the other e2e files and the files with slow tests, then the quick files, which fill the
    end on both workers instead of one slow file running alone. The order within a group, and
    among groups of one rank, stays as collected."""
    rank = {}
    for item in items:
        scope = worker_scope(item.nodeid)
        if scope == TIMED_GROUP:
            mine = 0
        elif scope.startswith("tests/e2e/") or item.get_closest_marker("slow") \
                or item.get_closest_marker("e2e"):
            mine = 1
        else:
            mine = 2
        rank[scope] = min(rank.get(scope, 2), mine)
    items.sort(key=lambda item: rank[worker_scope(item.nodeid)])


def worker_scope(nodeid):
    """The tests one worker runs together, one after the other: the timed group, or a file."""
    path = nodeid.split("::", 1)[0]
    return TIMED_GROUP if path in TIMED_E2E_FILES else path


# The Python 3.12 leg (scripts/test_current_megatron.sh: `-m current_leg`) runs every test
# marked current_megatron, wherever it lives, and these files, which decide whether the headline
# command works on today's Megatron (routes, headline defaults, windows, signals), but for the
# tests named in CURRENT_LEG_LEFT_OUT.
CURRENT_LEG_FILES = (
    "tests/e2e/test_current_megatron.py",
    "tests/e2e/test_integration.py",
    "tests/e2e/test_window_plans.py",
    "tests/e2e/test_loop_signals.py",
)
CURRENT_LEG_LEFT_OUT = (
    "test_each_megatron_signature_is_hooked",  # 0.12-0.15 shapes: the 3.11 leg's job
)


def in_current_leg(item):
    path = os.path.relpath(str(item.path), REPO).replace(os.sep, "/")
    name = getattr(item, "originalname", item.name)
    return "current_megatron" in item.keywords or (
        path in CURRENT_LEG_FILES and name not in CURRENT_LEG_LEFT_OUT)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_slow_unit_test(item):
            item.add_marker(pytest.mark.slow)
        if in_current_leg(item):
            item.add_marker(pytest.mark.current_leg)
    longest_first(items)
    core = installed_megatron_core()
    if core is not None and core >= CURRENT_MEGATRON:
        return
    shown = "none" if core is None else ".".join(map(str, core))
    skip = pytest.mark.skip(reason=f"needs megatron-core >= 0.17 (installed: {shown}); "
                                   f"the Python 3.12 leg, scripts/test_current_megatron.sh, "
                                   f"runs it")
    for item in items:
        if "current_megatron" in item.keywords:
            item.add_marker(skip)


# What makes torch_npu start a profiler or an allocator recorder of its own (mindspeed_prof/recording/armed.py)
TORCH_NPU_ARMING = ("PROF_CONFIG_PATH", "MSMONITOR_USE_DAEMON", "KINETO_USE_DAEMON",
                    "PROFILER_SAMPLECONFIG", "PROFILING_MODE", "OOM_SNAPSHOT_ENABLE")


@pytest.fixture(scope="session")
def _readers_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("readers_cache"))


@pytest.fixture(autouse=True)
def _clean_profiling_env(monkeypatch, _readers_cache):
    for name in list(os.environ):
        if name.startswith("MINDSPEED_PROF_") or name.startswith("FAKE_TORCH_NPU") \
                or name in TORCH_NPU_ARMING:
            monkeypatch.delenv(name, raising=False)
    # check/summary remember what they read (output/cache.py): in the session's temp folder,
    # never the developer's ~/.cache
    monkeypatch.setenv("MINDSPEED_PROF_CACHE", _readers_cache)
    yield


@pytest.fixture
def undo_patches():
    """Deactivate mindspeed_prof's patches after the test, whatever it did."""
    yield
    from mindspeed_prof.patches import deactivate
    deactivate()
