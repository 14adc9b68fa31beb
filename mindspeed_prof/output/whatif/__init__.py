"""What-if analysis of stragglers (ByteDance, OSDI'25: "Understanding Stragglers in Large Model
Training Using What-if Analysis"), in our own code.

One row per op of the pipeline schedule (the paper's table: ``schema``) is placed on a grid of
op x step x DP rank (``grid``); the schedule's dependency model is rebuilt from one step of one
DP replica (``model``); every step is then simulated without launch delays, as recorded and with
each op's duration replaced by its type's typical value (``simulate``), which gives the slowdown
S a step pays to its stragglers, and S attributed to each op type, DP rank and PP stage, and the
worker and stage imbalance metrics M_W and M_S (``analysis``). ``render`` says it in words and in
strict JSON. ``table`` reads and writes the Parquet file, ``capture`` and ``rows`` build the
table from a profiled run's schedule marks (``export``), ``source`` picks what ``whatif`` reads.
"""
