"""The numbers: step breakdowns and top kernels per rank (directory, ``summarize_directory``),
kernel and op-type totals (aggregate), torch chrome traces (torchtrace), per-request rows of an
inference profile (requests), the RL cross-role table (roles).
"""
