"""Benchmarks: scripts that print figures, run from the repository root as modules
(``python -m bench.tool_cycles``). See bench/README.md."""
