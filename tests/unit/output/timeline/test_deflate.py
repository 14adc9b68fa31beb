"""``output/timeline/deflate.py``, ``timeline``'s parts: each rank's part is compressed by the worker that writes it (no
uncompressed copy on disk, the compression done by the ranks in parallel), and the parts join
into one ordinary gzip member whose text is the ``.json`` output's, byte for byte."""

import gzip
import json
import os
import zlib

import pytest

from helpers.cli import run_cli
from output_fixtures import samples
from output_fixtures.torch_traces import torch_trace

from mindspeed_prof.output.timeline import deflate, write
from mindspeed_prof.output.timeline.deflate import crc32_combine


@pytest.fixture(params=["isal", "zlib"])
def compressor(request, monkeypatch):
    """ISA-L (a dependency where it has wheels) and zlib (where it does not): the same file."""
    if request.param == "isal":
        chosen = pytest.importorskip("isal.isal_zlib")
    else:
        chosen = zlib
    monkeypatch.setattr(deflate, "_CODEC", [chosen])
    return chosen


def test_isal_is_what_an_install_compresses_with_where_it_has_wheels():
    pytest.importorskip("isal")  # installed with the package on x86-64 and aarch64 (setup.py)
    assert deflate.codec().__name__ == "isal.isal_zlib"


def test_crc32_combine_gives_the_crc_of_the_joined_bytes():
    for first, second in ((b"", b""), (b"head", b""), (b"", b"tail"), (b"a" * 7, b"b" * 3),
                          (os.urandom(1000), os.urandom(65_537))):
        assert crc32_combine(zlib.crc32(first), zlib.crc32(second), len(second)) == \
            zlib.crc32(first + second)


def test_a_ranks_part_is_written_compressed_with_the_crc_and_length_of_its_text(tmp_path,
                                                                                compressor):
    torch_trace(tmp_path / "prof", rank=0, start=5, end=8)
    trace = next(str(p) for p in (tmp_path / "prof").rglob("*.json"))
    part = str(tmp_path / "rank0.part")
    counts = write.write_rank(part, 0, "rank 0", [(trace, 0, None)], 0.0, None, 0.0, 0)
    assert counts.events > 0
    with open(part, "rb") as handle:
        packed = handle.read()
    text = zlib.decompressobj(-zlib.MAX_WBITS).decompress(packed)
    assert text.startswith(b'{"ph":"M","name":"process_name","pid":1')
    assert len(packed) < len(text) / 3  # compressed (the old part was the plain text)
    with open(part + write.COUNTS_SUFFIX, "rb") as handle:
        said = write._types()["args"](handle.read())
    assert said["length"] == len(text) and said["crc"] == zlib.crc32(text)
    assert said["events"] == counts.events


def test_the_gz_output_is_one_gzip_member_holding_the_json_outputs_text(tmp_path, capsys,
                                                                         compressor):
    save = tmp_path / "prof"
    for rank in (0, 1, 2):
        torch_trace(save, rank=rank, start=5, end=8)
        samples.write_manifest(save, rank, hostname="node0", world_size=3, backend="torch")
    packed, plain = tmp_path / "m.json.gz", tmp_path / "m.json"
    for out in (packed, plain):
        assert run_cli(capsys, "timeline", save, "-o", out, "--min-us", "1")[0] == 0
    raw = packed.read_bytes()
    assert raw[:4] == b"\x1f\x8b\x08\x00" and raw[4:8] == b"\0\0\0\0"  # no name, mtime 0
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)  # checks the CRC and the length
    text = inflate.decompress(raw) + inflate.flush()
    assert inflate.eof and not inflate.unused_data  # one member, nothing after it
    assert text == plain.read_bytes() == gzip.decompress(raw)
    assert {e["pid"] for e in json.loads(text)["traceEvents"]} == {1, 2, 3}
    assert not [p for p in os.listdir(tmp_path) if ".part" in p or p.endswith(".tmp")]
