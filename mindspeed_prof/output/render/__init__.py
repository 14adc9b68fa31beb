"""What the commands print: terminal tables, JSON and CSV of ``check`` (check), ``summary``
(summary) and the RL role layout (roles), and ``summary --plot`` (plot).
"""
