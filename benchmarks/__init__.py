"""Benchmarks that drive a real `nanokube up` process the way clients do."""
