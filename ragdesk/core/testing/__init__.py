"""Builders of tiny random models for tests, the self-test and benchmarks (no downloads)."""
