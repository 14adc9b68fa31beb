"""Drivers: each scenario's events translated into ``begin(n)``/``end(n)`` on a window recorder
(DESIGN §6). ``training`` counts iterations; the inference and role drivers count requests and
the controller's RL steps."""
