"""The manifest window that lists a capture (``profile_manifest_rank{R}*.json``'s ``windows``).

A window entry names its folder (``dir``) and its files; a capture is matched by the files
first, then by the folder, then by being the manifest's only window. ``check`` judges a capture
against that window and ``summary`` reads the window's ``never_ran``: one rule for both.
"""

import os


def manifest_windows(manifest):
    """The window entries of a manifest (dicts only; [] when it has none)."""
    windows = manifest.data.get("windows") if manifest else None
    return [w for w in windows if isinstance(w, dict)] if isinstance(windows, list) else []


def _relative(run_path, manifest):
    return os.path.normpath(os.path.relpath(run_path, os.path.dirname(manifest.path)))


def _lists(window, rel):
    files = window.get("files") if isinstance(window.get("files"), list) else []
    for item in files:
        if not isinstance(item, str):
            continue
        item = os.path.normpath(item)
        if rel == item or rel.startswith(item + os.sep) or item.startswith(rel + os.sep):
            return True
    return False


def rank_from_manifests(run, manifests):
    """Give ``run`` the rank of the manifest whose windows list it (a capture whose own
    files name no rank)."""
    for rank, manifest in manifests.items():
        rel = _relative(run.path, manifest)
        if any(_lists(w, rel) for w in manifest_windows(manifest)):
            run.rank, run.rank_source = rank, f"listed in {manifest.rel}"
            return


def manifest_window(run, manifest):
    """The manifest's window entry holding this capture, or None."""
    windows = manifest_windows(manifest)
    if not windows:
        return None
    rel = _relative(run.path, manifest)
    chosen = [w for w in windows if _lists(w, rel)]
    if not chosen:
        folder = os.path.dirname(rel) or "."
        chosen = [w for w in windows if isinstance(w.get("dir"), str)
                  and os.path.normpath(w["dir"]) == folder]
    if not chosen and len(windows) == 1:
        chosen = windows
    return chosen[0] if len(chosen) == 1 else None
