"""Driving the request driver in tests, as a server would: requests on the calling thread or
each on a new thread (Flask), each running a few forwards of a tiny model."""

import functools
import json
import threading

import torch

from helpers import loop
from mindspeed_prof.drivers.inference import RequestDriver

MODEL = torch.nn.Linear(16, 16)


def work():
    MODEL(torch.randn(4, 16)).sum().backward()


config = functools.partial(loop.config, profile_step_start=2, profile_step_end=4)


def one_request(driver, forwards=4):
    with driver.request():
        for _ in range(forwards):
            with driver.forward():
                work()


def serve(driver, requests, *, on_new_threads=False):
    """``requests`` requests, each on the calling thread or on a new one (as Flask does);
    returns the native id of the thread each request ran on."""
    threads = []
    for _ in range(requests):
        if not on_new_threads:
            one_request(driver)
            threads.append(threading.get_native_id())
            continue
        ran_on = []

        def request():
            ran_on.append(threading.get_native_id())
            one_request(driver)

        thread = threading.Thread(target=request)
        thread.start()
        thread.join()
        threads.append(ran_on[0])
    return threads


def armed(cfg, **kwargs):
    driver = RequestDriver(cfg, **kwargs)
    driver.arm()
    return driver


def events(trace):
    with open(trace) as handle:
        return [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]
