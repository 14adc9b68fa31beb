"""Figures 3 and 4 in one process, on one model: what ``run.py`` starts when both are asked
for (the model's set-up, imports included, is the larger part of a quick run)."""

import argparse

from . import in_window, window_end
from .common import emit_rows
from .model import TinyGPT


def measure(quick=False):
    model = TinyGPT()
    try:
        return in_window.measure(quick, model) + window_end.measure(quick, model)
    finally:
        model.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    emit_rows(measure(parser.parse_args().quick))


if __name__ == "__main__":
    main()
