"""The poll's one collective: small JSON values in one fixed-size tensor.

``broadcast_object_list`` and ``all_gather_object`` each make two collectives (the sizes, then
the pickled bytes). What a poll shares is tiny (a trigger request, a rule's evidence, one
number per rank), so it goes as JSON in one tensor of ``SLOT`` bytes per rank: a 4-byte length,
then the text. One collective per poll; a value that does not fit (a trigger request naming
very many ranks) takes a second one, sized from the lengths every rank has just received, so
every rank makes the same calls. JSON, not pickle: nothing a rank receives is ever executed.
"""

import json
from typing import Any, List

SLOT = 1024  # bytes per rank: a header and the JSON text
_HEADER = 4


def _encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=str).encode()


def _pack(torch: Any, data: bytes, size: int, device: Any) -> Any:
    buffer = bytearray(size)
    buffer[:_HEADER] = len(data).to_bytes(_HEADER, "little")
    fits = data[:size - _HEADER]
    buffer[_HEADER:_HEADER + len(fits)] = fits
    return torch.frombuffer(buffer, dtype=torch.uint8).to(device)


def _unpack(raw: bytes) -> Any:
    return json.loads(raw.decode()) if raw else None


def _length(row: bytes) -> int:
    return int.from_bytes(row[:_HEADER], "little")


def broadcast(value: Any, *, rank: int, device: Any) -> Any:
    """Rank 0's ``value`` on every rank (the others' are ignored)."""
    import torch
    import torch.distributed as dist

    data = _encode(value) if rank == 0 else b""
    tensor = _pack(torch, data, SLOT, device)
    dist.broadcast(tensor, src=0)
    row = tensor.cpu().numpy().tobytes()
    length = _length(row)
    if length <= SLOT - _HEADER:
        return _unpack(row[_HEADER:_HEADER + length])
    whole = _pack(torch, data, _HEADER + length, device)  # too long for one slot: once more
    dist.broadcast(whole, src=0)
    return _unpack(whole.cpu().numpy().tobytes()[_HEADER:_HEADER + length])


def all_gather(value: Any, *, world_size: int, device: Any) -> List[Any]:
    """Every rank's ``value``, in rank order, on every rank."""
    import torch
    import torch.distributed as dist

    data = _encode(value)
    tensor = _pack(torch, data, SLOT, device)
    rows = [torch.empty_like(tensor) for _ in range(world_size)]
    dist.all_gather(rows, tensor)
    raw = [r.cpu().numpy().tobytes() for r in rows]
    lengths = [_length(r) for r in raw]
    longest = max(lengths)
    if longest > SLOT - _HEADER:  # some rank's value did not fit: every rank sends it whole
        tensor = _pack(torch, data, _HEADER + longest, device)
        rows = [torch.empty_like(tensor) for _ in range(world_size)]
        dist.all_gather(rows, tensor)
        raw = [r.cpu().numpy().tobytes() for r in rows]
    return [_unpack(r[_HEADER:_HEADER + n]) for r, n in zip(raw, lengths)]
