"""Bool arrays numpy writes its comparisons into, kept from block to block.

A fresh array per block is fresh pages: on this VM their faults cost half the time the numpy
search saved (1 MB trace pieces), and per file 3,100 more page faults per 95 MB trace than kept
arrays. Each array lies over a bytearray, so that ``bytearray.find`` can scan its marks by
memchr. Room grows to the next power of two: blocks differ by a few bytes, and a kept array
that grew by each would be fresh pages again.
"""

from ..deps import need


class BoolScratch:
    """``count`` bool arrays of at least the size asked, reused until a bigger one is asked."""

    def __init__(self, count: int = 1):
        self._count = count
        self._raw: list = []
        self._views: list = []

    def views(self, size: int) -> list:
        """The arrays, each cut to ``size`` (their bytes in ``raw``)."""
        if not self._raw or len(self._raw[0]) < size:
            numpy = need("numpy")
            room = 1 << max(size - 1, 1).bit_length()
            self._raw = [bytearray(room) for _ in range(self._count)]
            self._views = [numpy.frombuffer(raw, bool) for raw in self._raw]
        return [view[:size] for view in self._views]

    def raw(self, index: int = 0) -> bytearray:
        """The bytes of array ``index`` (0 or 1 each), for ``find``."""
        return self._raw[index]
