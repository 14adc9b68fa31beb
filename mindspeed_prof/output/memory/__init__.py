"""The memory view: the snapshots' check (check.py), their peaks and what held them (summary.py),
and their table, CSV and timeline page (render.py); files found and parsed through output/read."""
