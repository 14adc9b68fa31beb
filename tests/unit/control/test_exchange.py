"""The poll's one collective (mindspeed_prof/control/exchange.py) on a real two-rank gloo group: values
round-trip as JSON, in one collective when they fit a slot and two when one does not."""

import socket

import pytest
import torch.multiprocessing as mp


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _rank(rank, port, queue):
    import os

    import torch
    import torch.distributed as dist

    from mindspeed_prof.control import exchange

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    calls = {"broadcast": 0, "all_gather": 0}
    for name in calls:
        original = getattr(dist, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        setattr(dist, name, counted)
    cpu = torch.device("cpu")
    long_value = {"ranks": list(range(2000))}  # far more than one slot
    results = {
        "small": exchange.broadcast({"request": None, "spike": {"unit": 7}} if rank == 0 else
                                    {"ignored": True}, rank=rank, device=cpu),
        "calls_small": dict(calls),
        "long": exchange.broadcast(long_value if rank == 0 else None, rank=rank, device=cpu),
        "gather": exchange.all_gather({"number": 0.25 * (rank + 1)}, world_size=2, device=cpu),
        "gather_long": exchange.all_gather(long_value if rank == 1 else {"number": 1.0},
                                           world_size=2, device=cpu),
        "calls": dict(calls),
    }
    dist.destroy_process_group()
    queue.put((rank, results))


@pytest.fixture(scope="module")
def results():
    context = mp.get_context("spawn")
    queue = context.Queue()
    port = _free_port()
    processes = [context.Process(target=_rank, args=(r, port, queue)) for r in range(2)]
    for process in processes:
        process.start()
    found = dict(queue.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=30)
    return found


@pytest.mark.slow  # the module's two-rank gloo group (`results`)
def test_rank_zeros_value_reaches_every_rank_in_one_broadcast(results):
    for rank in (0, 1):
        assert results[rank]["small"] == {"request": None, "spike": {"unit": 7}}
        assert results[rank]["calls_small"] == {"broadcast": 1, "all_gather": 0}


@pytest.mark.slow  # the module's two-rank gloo group (`results`)
def test_every_ranks_value_reaches_every_rank_in_rank_order(results):
    assert results[0]["gather"] == results[1]["gather"] == [{"number": 0.25}, {"number": 0.5}]


@pytest.mark.slow  # the module's two-rank gloo group (`results`)
def test_a_value_longer_than_a_slot_takes_one_more_collective_on_every_rank(results):
    for rank in (0, 1):
        assert results[rank]["long"] == {"ranks": list(range(2000))}
        assert results[rank]["gather_long"] == [{"number": 1.0}, {"ranks": list(range(2000))}]
        # small broadcast 1 + long broadcast 2; gather 1 + long gather 2
        assert results[rank]["calls"] == {"broadcast": 3, "all_gather": 3}
