"""A GRPO-shaped RL job: ``python -m harness.rl.grpo --config rl.yaml --steps 4 --report-dir D``.

The controller (this process's main) computes nothing and never profiles: it starts the role
processes with torch.multiprocessing, numbers the RL steps and relays each step's data between
roles, as verl's and MindSpeed-RL's single controllers do. The roles compute:

    actor   2 processes, its own gloo group: weight sync, old_logprob, update (GRPO, grads
            all-reduced over the actor group)
    ref     1 process: ref_logprob
    rollout 1 process: sync_weights (loads the actor's weights), generate

Every role process calls ``mindspeed_prof.role_profiler(role, config=..., total_steps=...)`` and
wraps each RL step in ``prof.step(g)`` and each command in ``prof.stage(name)``: the two or three
lines a verl or MindSpeed-RL worker adds. Each process writes ``{report_dir}/{role}{rank}.json``
(pid, steps, stages, losses, rewards) so tests can tell the work was done.
"""

import argparse
import json
import os
import queue
import sys
import time

import torch.multiprocessing as mp

from harness.launch import free_port

ROLES = (("actor", 2), ("ref", 1), ("rollout", 1))
REPLY_TIMEOUT_S = 120
# A role process whose controller died (killed by a test's timeout) ends itself after this long.
ORPHAN_TIMEOUT_S = 2 * REPLY_TIMEOUT_S


_free_port = free_port  # each role group's MASTER_PORT, drawn where the harness draws its ports


# -- role processes ---------------------------------------------------------------------------

class RoleWork:
    """One role process's model, and what each controller command does with it. Shared by the
    multiprocessing job here and the Ray-actor one (grpo_ray.py)."""

    def __init__(self, role, rank, world_size, port, config, total_steps):
        from harness.rl import model as rl

        rl.init_role_group(rank, world_size, port)
        import torch

        import mindspeed_prof

        self.rl, self.role, self.rank = rl, role, rank
        self.prof = mindspeed_prof.role_profiler(role, config=config, total_steps=total_steps)
        self.net = rl.build_model()
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.05) \
            if role == "actor" else None
        self.report = {"role": role, "rank": rank, "pid": os.getpid(), "steps": [],
                       "stages": [], "losses": [], "rewards": []}

    def run(self, command, payload, step):
        import torch
        import torch.distributed as dist

        rl, net = self.rl, self.net
        if command == "sync_weights":
            if self.role == "actor":
                return {k: v.detach().clone() for k, v in net.state_dict().items()
                        if v is not None and not k.endswith("_extra_state")} \
                    if self.rank == 0 else None
            net.load_state_dict(payload, strict=False)
            return None
        if command == "generate":
            return rl.generate(net, rl.prompts(step), step)
        if command in ("ref_logprob", "old_logprob"):
            with torch.no_grad():
                return rl.logprobs(net, payload)
        if command == "update":
            loss, reward = rl.grpo_update(net, self.optimizer, *payload, group=dist.group.WORLD)
            self.report["losses"].append(loss)
            self.report["rewards"].append(reward)
            return loss
        raise ValueError(f"unknown command {command!r}")

    def finish(self, report_dir):
        import torch.distributed as dist

        self.prof.close()
        with open(os.path.join(report_dir, f"{self.role}{self.rank}.json"), "w") as handle:
            json.dump(self.report, handle)
        dist.destroy_process_group()


def worker(role, rank, world_size, port, config, total_steps, inbox, outbox, report_dir):
    work = RoleWork(role, rank, world_size, port, config, total_steps)
    prof, report = work.prof, work.report
    while True:
        message = inbox.get(timeout=ORPHAN_TIMEOUT_S)
        if message[0] == "stop":
            break
        step = message[1]
        with prof.step(step):
            report["steps"].append(step)
            while True:
                command, payload = inbox.get(timeout=ORPHAN_TIMEOUT_S)
                if command == "end":
                    break
                with prof.stage(command):
                    result = work.run(command, payload, step)
                report["stages"].append([step, command])
                outbox.put((role, rank, command, result))
    work.finish(report_dir)


# -- the controller ---------------------------------------------------------------------------

def rl_step(ask):
    """One GRPO step as the controller drives it: ``ask(role, command, payload)`` runs a command
    on every process of a role and returns rank 0's reply."""
    weights = ask("actor", "sync_weights")
    ask("rollout", "sync_weights", weights)
    tokens = ask("rollout", "generate")
    ref = ask("ref", "ref_logprob", tokens)
    old = ask("actor", "old_logprob", tokens)
    ask("actor", "update", (tokens, old, ref))


class Controller:
    """Numbers the RL steps and relays data; no model, no tensors computed, no profiler."""

    def __init__(self, config, total_steps, report_dir):
        context = mp.get_context("fork")
        self.outbox = context.Queue()
        self.inboxes, self.processes = {}, []
        for role, world_size in ROLES:
            port = _free_port()
            for rank in range(world_size):
                inbox = context.Queue()
                self.inboxes[(role, rank)] = inbox
                process = context.Process(
                    target=worker, name=f"{role}{rank}", daemon=True,
                    args=(role, rank, world_size, port, config, total_steps, inbox, self.outbox,
                          report_dir))
                process.start()
                self.processes.append(process)

    def ask(self, role, command, payload=None):
        """Send ``command`` to every process of ``role``; the rank-0 reply."""
        ranks = [key for key in self.inboxes if key[0] == role]
        for key in ranks:
            self.inboxes[key].put((command, payload))
        replies = {}
        while len(replies) < len(ranks):
            try:
                got_role, rank, got, result = self.outbox.get(timeout=REPLY_TIMEOUT_S)
            except queue.Empty:
                raise RuntimeError(f"no reply from {role} to {command} in {REPLY_TIMEOUT_S} s; "
                                   f"alive: {[p.name for p in self.processes if p.is_alive()]}")
            if (got_role, got) != (role, command):
                raise RuntimeError(f"expected {role}/{command}, got {got_role}/{got}")
            replies[rank] = result
        return replies[0]

    def rl_step(self, step):
        for inbox in self.inboxes.values():
            inbox.put(("begin", step))
        rl_step(self.ask)
        for inbox in self.inboxes.values():
            inbox.put(("end", None))

    def finish(self):
        for inbox in self.inboxes.values():
            inbox.put(("stop",))
        codes = {}
        for process in self.processes:
            process.join(REPLY_TIMEOUT_S)
            if process.is_alive():
                process.kill()
                process.join()
            codes[process.name] = process.exitcode
        return codes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="Role YAML for mindspeed_prof.")
    parser.add_argument("--steps", type=int, default=4, help="RL steps.")
    parser.add_argument("--report-dir", required=True)
    args = parser.parse_args(argv)
    os.makedirs(args.report_dir, exist_ok=True)
    # Imported once here so the forked role processes do not each pay for it.
    import megatron.core.models.gpt  # noqa: F401
    started = time.time()
    controller = Controller(args.config, args.steps, args.report_dir)
    try:
        for step in range(1, args.steps + 1):
            controller.rl_step(step)
    finally:
        codes = controller.finish()
    print(json.dumps({"exit_codes": codes, "seconds": round(time.time() - started, 1)}))
    return 0 if all(code == 0 for code in codes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
