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
                   "gloo or torchrun jobs) or runs mypy, marked in its file (pytestmark, a "
                   "decorator); `-m \"not e2e and not slow\"` is the loop to run between edits, CI "
                   "runs them all")
    config.addinivalue_line(
        "markers", "current_leg: what the Python 3.12 leg runs (scripts/test_current_megatron.sh): "
                   "every current_megatron test and the files in CURRENT_LEG_FILES")
    config.addinivalue_line(
        "markers", "current_megatron: needs megatron-core >= 0.17 (Python >= 3.12); skipped "
                   "elsewhere, run by scripts/test_current_megatron.sh")
    config.addinivalue_line(
        "markers", "current_shapes: a stand-in of Megatron-LM 0.17+'s megatron.training "
                   "(tests/e2e/test_current_megatron.py); runs where megatron-core >= 0.17 is "
                   "installed, skipped over older cores, where it would repeat that leg's test")


def installed_megatron_core():
    """The installed megatron-core's (major, minor), or None (metadata only: no import)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return tuple(int(part) for part in version("megatron-core").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return None


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
# command works on today's Megatron (routes, headline defaults, windows, signals, the pieces of
# its pipeline schedules the marks wrap), but for the tests named in CURRENT_LEG_LEFT_OUT.
CURRENT_LEG_FILES = (
    "tests/e2e/test_current_megatron.py",
    "tests/e2e/test_integration.py",
    "tests/e2e/test_window_plans.py",
    "tests/e2e/test_loop_signals.py",
    "tests/unit/patches/test_megatron_schedule_marks.py",
)
CURRENT_LEG_LEFT_OUT = (
    "test_each_megatron_signature_is_hooked",  # 0.12-0.15 shapes: the 3.11 leg's job
)
# ... and these tests of other files (path::name, parameters included): one job each of what
# the schedule marks feed, on today's schedules, for under a minute of the leg (measured on
# megatron-core 0.19.2, one process, 2 cores at a load of 2-4): the interleaved schedule marked
# per chunk and priced by `pipeline` (11 s; 1F1B's marks feed whatif's job), `whatif` blaming
# a slowed stage (13 s), and the wait analysis naming a host-bound rank on two agents (17 s).
CURRENT_LEG_TESTS = (
    "tests/e2e/test_pipeline.py::"
    "test_virtual_stages_are_marked_per_chunk_and_priced_by_the_interleaved_theory",
    "tests/e2e/test_whatif_pipeline.py::"
    "test_a_slowed_stage_is_blamed_with_stage_imbalance_and_the_artifact_agrees",
    "tests/e2e/test_waits_two_agents.py::"
    "test_the_rank_the_other_waits_for_is_named_with_its_group_and_reason"
    "[HARNESS_SLOW_FROM_ITER-1-host-bound]",
)


def in_current_leg(item):
    path = os.path.relpath(str(item.path), REPO).replace(os.sep, "/")
    name = getattr(item, "originalname", item.name)
    return "current_megatron" in item.keywords or f"{path}::{item.name}" in CURRENT_LEG_TESTS \
        or (path in CURRENT_LEG_FILES and name not in CURRENT_LEG_LEFT_OUT)


def pytest_collection_modifyitems(config, items):
    for item in items:
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
    # Run over an older core, a 0.17+ stand-in's test repeats the 3.12 leg's run of it over
    # 0.19.2, the pairing users have, for ~80 s of this leg (19 torchrun jobs in CI).
    repeat = pytest.mark.skip(reason=f"Megatron-LM 0.17+'s shapes: the Python 3.12 leg, "
                                     f"scripts/test_current_megatron.sh, runs it over "
                                     f"megatron-core 0.19.2 (installed here: {shown})")
    for item in items:
        if "current_megatron" in item.keywords:
            item.add_marker(skip)
        elif "current_shapes" in item.keywords:
            item.add_marker(repeat)


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
