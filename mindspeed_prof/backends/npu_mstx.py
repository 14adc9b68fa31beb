"""Our labels as mstx ranges: what a light capture (level_none, no CPU activity) still records.

At ``--profile-level level_none`` torch_npu collects no host operators unless CPU activity is on,
so the ``record_function`` ranges we label units, forwards and stages with vanish. mstx ranges
(``torch_npu.npu.mstx.range_start/range_end``, host side, in torch_npu's ``default`` domain)
are collected whenever mstx is: asked for with ``--profile-mstx``, or forced on by torch_npu
(>= 2.7.1) at level_none. torch_npu >= 2.10 also wraps each profiler step in a
``ProfilerStep#N`` mstx range; on earlier wheels we open that range ourselves, so every wheel's
light capture shows the units under the name ``check`` reads. Both are feature-detected on the
installed wheel, not compared by version. Never imports torch_npu: the backend hands it in.
"""

from typing import Any, Literal, Optional

from ..config.profiler_config import MSTX_DOMAIN


class MstxRange:
    """One mstx range, as a context manager: on the host, or (``stream`` given) on that device
    stream too, so the device's time between its start and end is measured."""

    __slots__ = ("_mstx", "_name", "_id", "_stream")

    def __init__(self, mstx: Any, name: str, stream: Any = None) -> None:
        self._mstx, self._name, self._id, self._stream = mstx, name, 0, stream

    def __enter__(self) -> "MstxRange":
        if self._stream is None:
            self._id = self._mstx.range_start(self._name, domain=MSTX_DOMAIN)
        else:
            self._id = self._mstx.range_start(self._name, self._stream, domain=MSTX_DOMAIN)
        return self

    def __exit__(self, *exc: Any) -> Literal[False]:
        if self._id:  # torch_npu returns 0 (and prints why) when it could not start one
            self._mstx.range_end(self._id, domain=MSTX_DOMAIN)
            self._id = 0
        return False


class MstxLabels:
    """How one window's labels and units are marked: as mstx ranges, or (``NO_MSTX``) not."""

    def __init__(self, mstx: Any = None, own_steps: bool = False) -> None:
        self._mstx, self._own_steps = mstx, own_steps and mstx is not None
        self._step: Optional[MstxRange] = None

    @classmethod
    def for_window(cls, torch_npu: Any, tp: Any, experimental: Any) -> "MstxLabels":
        """Read back from the ``_ExperimentalConfig`` torch_npu built whether mstx collects."""
        collects = getattr(experimental, "_mstx", False) is True \
            or getattr(experimental, "_msprof_tx", False) is True
        mstx = getattr(getattr(torch_npu, "npu", None), "mstx", None)
        if not collects or mstx is None:
            return NO_MSTX
        return cls(mstx, own_steps=not hasattr(tp.profile, "_start_step_mstx_range"))

    def range(self, name: str) -> Optional[MstxRange]:
        """An mstx range for ``name``, or None: label with record_function instead."""
        return MstxRange(self._mstx, name) if self._mstx is not None else None

    def device_range(self, name: str, stream: Any) -> Optional[MstxRange]:
        """An mstx range for ``name`` on ``stream`` (the schedule's marks), or None."""
        return MstxRange(self._mstx, name, stream) if self._mstx is not None else None

    def step_began(self, n: int) -> None:
        if self._own_steps:
            self._step = MstxRange(self._mstx, f"ProfilerStep#{n}").__enter__()

    def step_ended(self) -> None:
        if self._step is not None:
            self._step.__exit__()
            self._step = None


NO_MSTX = MstxLabels()
