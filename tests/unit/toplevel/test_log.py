"""Console messages from many ranks share one torchrun log: each must arrive whole."""

import io

from mindspeed_prof import log


class RecordingStream(io.StringIO):
    def __init__(self):
        super().__init__()
        self.writes = []

    def write(self, text):
        self.writes.append(text)
        return super().write(text)


def test_a_message_and_its_newline_are_one_write_so_ranks_cannot_interleave_inside_a_line(
        monkeypatch):
    stream = RecordingStream()
    monkeypatch.setattr("sys.stderr", stream)
    log.error("start: broken", rank=3)
    assert stream.writes == ["[mindspeed_prof rank 3] ERROR: start: broken\n"]
