"""Container runtimes other than the simulated default: real processes in
network namespaces (process.py)."""
