"""Integrations with frameworks that own the loop and the workers (verl): one package per
framework, importing it lazily, only where that framework's own classes are subclassed. The core
never imports them (tests/unit/project/test_layering.py)."""
