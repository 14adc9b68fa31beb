"""The verl integration's worker over the verl 0.9.1 imitation (tests/fakes/verl_imitation),
driven in the order RayPPOTrainer.fit calls it, with the real torch.profiler. The real verl
runs in tests/e2e/test_real_verl.py."""

import asyncio
import inspect
import json

import pytest
import torch

from mindspeed_prof.errors import ConfigError
from mindspeed_prof.integrations.verl import settings
from mindspeed_prof.integrations.verl.shape import UnknownVerlShape
from mindspeed_prof.integrations.verl.steps import StepOrderError

from helpers.rl import manifests, steps_by_folder
from helpers.traces import torch_traces
from helpers.verl_loop import drop_verl_modules, fit, load_worker_module, worker_config


@pytest.fixture
def verl(monkeypatch):
    """Loads the worker module over an imitation shape: ``verl("no-global-steps")``."""
    workers = []

    def load(shape="0.9.1", version="0.9.1"):
        module = load_worker_module(monkeypatch, shape, version)
        module.created = workers
        return module

    yield load
    for worker in workers:
        worker.mindspeed_prof.close()
    drop_verl_modules()


def make(module, config, role="actor_rollout_ref", init=True):
    worker = module.ProfiledActorRolloutRefWorker(config, role)
    module.created.append(worker)
    if init:
        worker.init_model()
    return worker


def role_yaml(save, **roles):
    return {"profile": True, "profile_save_path": str(save), "profile_backend": "torch",
            "roles": roles}


ISSUE_ROLES = {"actor": {"profile_steps": "2-3", "profile_stages": ["old_logprob", "update"]},
               "ref": {"profile_steps": "2"}, "rollout": {"profile_steps": "2-3"}}


def test_every_overridden_method_keeps_verls_dispatch_attributes_and_async_kind(verl):
    module = verl()
    from verl.single_controller.base.decorator import MAGIC_ATTR
    from verl.single_controller.ray.base import bind_workers_method_to_parent

    base, ours = module._Base, module.ProfiledActorRolloutRefWorker
    registered = [n for n in dir(base) if hasattr(getattr(base, n), MAGIC_ATTR)]
    assert {"compute_log_prob", "update_actor", "compute_ref_log_prob", "update_weights",
            "init_model", "start_profile"} <= set(registered)
    for name in registered:
        assert getattr(getattr(ours, name), MAGIC_ATTR) == getattr(getattr(base, name), MAGIC_ATTR)
        assert (inspect.iscoroutinefunction(getattr(ours, name))
                == inspect.iscoroutinefunction(getattr(base, name))), name
    assert getattr(ours, "compute_log_prob") is not getattr(base, "compute_log_prob")

    class WorkerDict:  # how verl's colocated worker group re-exposes them
        pass

    bind_workers_method_to_parent(WorkerDict, "actor_rollout_ref", ours)
    assert inspect.iscoroutinefunction(WorkerDict.actor_rollout_ref_update_weights)
    assert getattr(WorkerDict.actor_rollout_ref_update_actor, MAGIC_ATTR) == \
        getattr(base.update_actor, MAGIC_ATTR)


def test_each_colocated_role_records_its_stages_at_the_controllers_steps(verl, tmp_path):
    module = verl()
    worker = make(module, worker_config(role_yaml(tmp_path, **ISSUE_ROLES), total_steps=3))
    fit(worker, 3)
    worker.mindspeed_prof.close()
    assert steps_by_folder(tmp_path / "actor" / "old_logprob") == {"step_2-2": [2], "step_3-3": [3]}
    assert steps_by_folder(tmp_path / "actor" / "update") == {"step_2-2": [2], "step_3-3": [3]}
    assert steps_by_folder(tmp_path / "ref" / "ref_logprob") == {"step_2-2": [2]}
    assert steps_by_folder(tmp_path / "rollout" / "generate") == {"step_2-2": [2],
                                                                   "step_3-3": [3]}
    found = dict(manifests(tmp_path))
    assert sorted(found) == ["actor/old_logprob", "actor/update", "ref/ref_logprob",
                             "rollout/generate"]
    assert all(data["errors"] == [] for data in found.values()), found
    with open(torch_traces(str(tmp_path / "actor" / "update" / "step_3-3"))[0]) as handle:
        names = {event.get("name") for event in json.load(handle)["traceEvents"]}
    assert "stage:update" in names and "stage:old_logprob" not in names
    assert any(str(name).startswith("aten::") for name in names)  # the update's own work


def test_the_step_follows_the_last_weight_sync_so_a_resumed_run_keeps_its_numbers(verl, tmp_path):
    module = verl()
    roles = {"actor": {"profile_steps": "7", "profile_stages": ["update"]}}
    worker = make(module, worker_config(role_yaml(tmp_path, **roles)))
    fit(worker, 3, start=5)  # resumed at 5: syncs with 5 first, runs 6, 7, 8
    worker.mindspeed_prof.close()
    assert steps_by_folder(tmp_path / "actor" / "update") == {"step_7-7": [7]}


def test_a_validation_generation_between_steps_is_not_recorded_as_the_next_step(verl, tmp_path):
    module = verl()
    roles = {"rollout": {"profile_steps": "2"}}
    worker = make(module, worker_config(role_yaml(tmp_path, **roles)))
    fit(worker, 3, validate_after=(1, 2))
    worker.mindspeed_prof.close()
    (folder, data), = manifests(tmp_path)
    assert steps_by_folder(tmp_path / "rollout" / "generate") == {"step_2-2": [2]}
    assert data["errors"] == [] and not [w for w in data.get("warnings", [])
                                         if "ran again" in str(w)]


def test_without_a_role_yaml_nothing_is_written_and_results_are_verls(verl, tmp_path,
                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = verl()
    plain = module._Base(worker_config(), "actor_rollout_ref")
    plain.init_model()
    ours = make(module, worker_config())
    assert not ours.mindspeed_prof.active
    assert ours.rollout.generate_sequences.__func__ is type(ours.rollout).generate_sequences
    for (a_old, a_ref, a_loss), (b_old, b_ref, b_loss) in zip(fit(plain, 2), fit(ours, 2)):
        assert torch.equal(a_old, b_old) and torch.equal(a_ref, b_ref) and a_loss == b_loss
    assert list(tmp_path.iterdir()) == []


def test_profiling_does_not_change_what_the_worker_computes(verl, tmp_path):
    module = verl()
    plain = make(module, worker_config())
    ours = make(module, worker_config(role_yaml(tmp_path, **ISSUE_ROLES)))
    for (a_old, _, a_loss), (b_old, _, b_loss) in zip(fit(plain, 3), fit(ours, 3)):
        assert torch.equal(a_old, b_old) and a_loss == b_loss


def test_the_role_yaml_can_come_from_mindspeed_prof_config(verl, tmp_path, monkeypatch):
    path = tmp_path / "rl.yaml"
    path.write_text(json.dumps(role_yaml(tmp_path / "prof", ref={"profile_steps": "1"})))
    monkeypatch.setenv("MINDSPEED_PROF_CONFIG", str(path))
    worker = make(verl(), worker_config())
    assert worker.mindspeed_prof.roles() == ("ref",)  # only the role the YAML lists
    fit(worker, 1)
    worker.mindspeed_prof.close()
    assert steps_by_folder(tmp_path / "prof" / "ref" / "ref_logprob") == {"step_1-1": [1]}


def test_an_unknown_role_in_the_yaml_is_refused_with_the_closest_name(verl, tmp_path):
    with pytest.raises(ConfigError, match=r"roles\.refs .*did you mean 'ref'"):
        make(verl(), worker_config(role_yaml(tmp_path, refs={})), init=False)


def test_a_stage_the_role_does_not_run_is_refused(verl, tmp_path):
    roles = {"actor": {"profile_stages": ["generate"]}}
    with pytest.raises(ConfigError, match=r"roles\.actor\.profile_stages generate.*old_logprob, "
                                          r"update"):
        make(verl(), worker_config(role_yaml(tmp_path, **roles)), init=False)


def test_verls_own_profiler_beside_ours_is_refused_with_the_fix(verl, tmp_path):
    config = worker_config(role_yaml(tmp_path, **ISSUE_ROLES),
                           actor={"tool": "torch", "enable": True, "ranks": [0]})
    with pytest.raises(ConfigError) as caught:
        make(verl(), config, init=False)
    message = str(caught.value)
    assert "actor_rollout_ref.actor.profiler (tool=torch, enable=True)" in message
    assert "global_profiler.tool=mindspeed_prof" in message


def test_verls_profiler_of_another_role_in_the_same_process_is_refused_too(verl, tmp_path):
    # the worker's own DistProfiler (the actor's block) starts the process's one profiler, so
    # it clashes with the ref's session as much as with the actor's
    config = worker_config(role_yaml(tmp_path, ref={"profile_steps": "2"}),
                           actor={"tool": "npu", "enable": True})
    with pytest.raises(ConfigError, match=r"actor_rollout_ref\.actor\.profiler \(tool=npu"):
        make(verl(), config, init=False)


def test_verls_profiler_on_another_rank_or_tool_is_no_conflict(verl, tmp_path):
    config = worker_config(role_yaml(tmp_path, **ISSUE_ROLES),
                           actor={"tool": "torch", "enable": True, "ranks": [1]},
                           ref={"tool": "mindspeed_prof", "enable": True})
    assert make(verl(), config).mindspeed_prof.active


def test_a_rollout_generating_in_server_processes_is_refused_when_the_yaml_names_it(verl,
                                                                                   tmp_path):
    config = worker_config(role_yaml(tmp_path, **ISSUE_ROLES), rollout="vllm")
    with pytest.raises(ConfigError, match=r"roles\.rollout: verl's rollout 'vllm' generates in "
                                          r"its own server processes.*rollout\.profiler"):
        make(verl(), config, init=False)


def test_a_rollout_in_server_processes_is_left_out_when_no_roles_are_named(verl, tmp_path,
                                                                         capsys):
    config = worker_config({"profile": True, "profile_save_path": str(tmp_path),
                            "profile_backend": "torch", "profile_steps": "1"}, rollout="vllm")
    worker = make(verl(), config)
    assert worker.mindspeed_prof.roles() == ("actor", "ref")
    assert "records actor and ref only" in capsys.readouterr().err


@pytest.mark.parametrize("shape, missing", [
    ("log-prob-renamed", "ActorRolloutRefWorker.compute_log_prob: not defined"),
    ("sync-update-weights", "ActorRolloutRefWorker.update_weights: is not async"),
    ("no-global-steps", "ActorRolloutRefWorker.update_weights: takes no 'global_steps'"),
    ("unregistered-update", "ActorRolloutRefWorker.update_actor: not a worker method registered"),
])
def test_an_unknown_worker_shape_fails_at_import_naming_the_version_and_what_is_missing(
        verl, shape, missing):
    with pytest.raises(UnknownVerlShape) as caught:
        verl(shape, version="0.10.0")
    message = str(caught.value)
    assert "verl 0.10.0's differs" in message and missing in message
    assert "knows the ActorRolloutRefWorker of verl 0.9.1" in message


def test_an_untested_version_of_the_known_shape_works_and_says_so(verl, tmp_path, capsys):
    worker = make(verl(version="0.9.2"), worker_config(role_yaml(tmp_path, ref={})))
    assert worker.mindspeed_prof.active
    assert "verl 0.9.2: the worker has the shape of verl 0.9.1" in capsys.readouterr().err


def test_update_weights_without_global_steps_is_an_error_naming_the_trainer(verl, tmp_path):
    worker = make(verl(), worker_config(role_yaml(tmp_path, **ISSUE_ROLES)))
    with pytest.raises(StepOrderError, match=r"update_weights\(\) without global_steps.*"
                                             r"trainer\.use_v1=false"):
        asyncio.run(worker.update_weights())


def test_work_before_any_weight_sync_is_an_error_not_a_guessed_step(verl, tmp_path):
    worker = make(verl(), worker_config(role_yaml(tmp_path, **ISSUE_ROLES)))
    with pytest.raises(StepOrderError, match=r"ran actor's old_logprob before any "
                                             r"update_weights"):
        worker.compute_log_prob({"x": torch.zeros(1, 8)})


def test_verls_profile_step_must_be_the_step_the_integration_counts(verl, tmp_path):
    worker = make(verl(), worker_config(role_yaml(tmp_path, **ISSUE_ROLES)))
    fit(worker, 1, profile_steps=(1,))  # agrees: verl's step 1 after the sync with 0
    assert worker.profiler.calls[0] == ("start", {"role": "train", "profile_step": 1})
    with pytest.raises(StepOrderError, match="started profile step 5.*counts step 2"):
        worker.start_profile(role="train", profile_step=5)


def test_verls_global_profiler_settings_become_the_role_yaml():
    config = {"global_profiler": {"tool": "mindspeed_prof", "steps": [2, 3],
                                  "save_path": "/tmp/p"},
              "actor_rollout_ref": {"actor": {"profiler": {"tool": "mindspeed_prof",
                                                           "enable": True, "ranks": []}},
                                    "ref": {"profiler": {"enable": True, "all_ranks": True}},
                                    "rollout": {"profiler": {"tool": "torch", "enable": True}}}}
    assert settings.from_verl_profiler(config) == {
        "profile": True, "profile_steps": [2, 3], "profile_save_path": "/tmp/p",
        "roles": {"actor": {"profile_ranks": "0"}, "ref": {"profile_ranks": "all"}}}
    assert settings.from_verl_profiler({"global_profiler": {"tool": "torch"}}) is None


def test_global_profiler_tool_without_steps_is_refused():
    with pytest.raises(ConfigError, match=r"global_profiler\.steps"):
        settings.from_verl_profiler({"global_profiler": {"tool": "mindspeed_prof"}})


def test_a_verl_driven_yaml_profiles_verls_steps_in_the_enabled_roles(verl, tmp_path):
    mapping = settings.from_verl_profiler({
        "global_profiler": {"tool": "mindspeed_prof", "steps": [2], "save_path": str(tmp_path)},
        "actor_rollout_ref": {"actor": {"profiler": {"enable": True}}}})
    mapping["profile_backend"] = "torch"
    worker = make(verl(), worker_config(mapping))
    fit(worker, 3, profile_steps=(2,))
    worker.mindspeed_prof.close()
    assert steps_by_folder(tmp_path / "actor" / "update") == {"step_2-2": [2]}
    assert sorted(folder for folder, _ in manifests(tmp_path)) == ["actor/old_logprob",
                                                                   "actor/update"]
