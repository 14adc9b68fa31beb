"""``mindspeed-prof pipeline``: the bubble of every pipeline stage, read from the schedule marks
(``config/schedule_marks.py``) the training patches write inside windows."""
