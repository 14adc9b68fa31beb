"""Verdict rules: what a capture must hold (expect), one file (file), one capture (capture),
every rank under a save path (directory, ``check_directory``), the RL role layout (roles), and
the verdict model they fill (report).
"""
