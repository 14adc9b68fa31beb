"""Figures 3 and 4 in one process, on one model: what ``run.py`` starts when both are asked
for (the model's set-up, imports included, is the larger part of a quick run)."""


from . import in_window, window_end
from .common import figure_main
from .model import TinyGPT


def measure(quick=False):
    model = TinyGPT()
    try:
        return in_window.measure(quick, model) + window_end.measure(quick, model)
    finally:
        model.close()


if __name__ == "__main__":
    figure_main(measure, __doc__)
