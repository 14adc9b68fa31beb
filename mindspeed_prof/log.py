"""Console messages, prefixed so they stand out in an interleaved multi-rank training log."""

import sys

PREFIX = "[mindspeed_prof]"


def _tag(rank):
    return PREFIX if rank is None else f"[mindspeed_prof rank {rank}]"


def info(message, rank=None):
    print(f"{_tag(rank)} {message}", flush=True)


def warning(message, rank=None):
    print(f"{_tag(rank)} WARNING: {message}", file=sys.stderr, flush=True)


def error(message, rank=None):
    print(f"{_tag(rank)} ERROR: {message}", file=sys.stderr, flush=True)
