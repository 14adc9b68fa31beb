"""Take one ``ProfilerStep#N`` range out of a torch chrome trace: the step torch.profiler opened
for a unit that never ran.

A plain loop calls ``prof.step()`` at the end of each iteration, which opens the next iteration's
step; when the loop then ends, ``stop()`` closes a ``ProfilerStep#N`` for an iteration that never
ran, and every reader (check, summary, Perfetto) would count it. The recorder knows it did not
run and asks for it to go. Kineto writes one event per ``  {`` ... ``  }`` block, so the file is
filtered as a stream of lines, one block held back, never loaded whole.
"""

import os

_CATEGORIES = ('"cat": "user_annotation"', '"cat": "gpu_user_annotation"')


def remove_step(path: str, step: int) -> bool:
    """Drop the ``ProfilerStep#step`` range events from the trace at ``path``, in place (a temp
    file, then a rename). True when one was found and removed."""
    name = f'"name": "ProfilerStep#{step}"'
    tmp = f"{path}.steps.{os.getpid()}"
    removed = False
    try:
        with open(path, encoding="utf-8") as source, open(tmp, "w", encoding="utf-8") as out:
            held: list = []  # the last complete block, written once the next one is known
            block = None
            for line in source:
                if block is None:
                    if line.rstrip("\n") == "  {":
                        block = [line]
                        continue
                    if held and line.lstrip().startswith("]"):
                        _close_list(held)
                    out.writelines(held)
                    held = []
                    out.write(line)
                    continue
                block.append(line)
                if not line.startswith("  }"):
                    continue
                text = "".join(block)
                if name in text and any(c in text for c in _CATEGORIES):
                    removed = True
                else:
                    out.writelines(held)
                    held = block
                block = None
            out.writelines(held + (block or []))
        if removed:
            os.replace(tmp, path)
        return removed
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _close_list(held):
    """The block before ``]`` must not end with a comma (the removed block was the last)."""
    last = held[-1]
    if last.rstrip("\n").endswith(","):
        held[-1] = last.rstrip("\n")[:-1] + "\n"
