"""The RL roles view: verdicts keyed by (role, rank) (check.py), the cross-role table per RL step
(summary.py) and their words (render.py); role folders found through output/read/roles.py."""
