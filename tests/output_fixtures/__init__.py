"""Builders of profiler output trees (real samples, damaged copies, torch traces) for tests."""
