"""Damage copies of real output files the ways real runs damage them."""

import os
import random


def truncate(path, keep=0.5):
    """Cut the file to ``keep`` of its size (a killed writer, a full disk)."""
    size = os.path.getsize(path)
    with open(path, "r+b") as handle:
        handle.truncate(int(size * keep))


def zero_bytes(path):
    open(path, "wb").close()


def rename_header(path, old, new):
    """Rename one column in a CSV header (a release that renamed it, or damage)."""
    with open(path, "rb") as handle:
        header, rest = handle.read().split(b"\n", 1)
    names = header.decode().split(",")
    names = [new if n.strip() == old else n for n in names]
    with open(path, "wb") as handle:
        handle.write(",".join(names).encode() + b"\n" + rest)


def flip_bytes(path, seed, count=8):
    """Overwrite ``count`` random bytes with random values."""
    rng = random.Random(seed)
    with open(path, "r+b") as handle:
        data = bytearray(handle.read())
        if not data:
            return
        for _ in range(count):
            data[rng.randrange(len(data))] = rng.randrange(256)
        handle.seek(0)
        handle.write(data)


def write_bytes(path, data):
    with open(path, "wb") as handle:
        handle.write(data)
