"""Benchmarks and load generators (not tests); see bench/README.md. Run modules from the repo root."""
