"""``mindspeed-prof report``: one self-contained HTML page of a save path (summary's numbers)."""
