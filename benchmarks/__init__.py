"""Benchmarks: each runs our code and a reference side by side in one process.

Every module here defines `NAME`, `DESCRIPTION` and `run(quick: bool) -> dict`
returning {"rows": [dict, ...], "summary": {key: value}}; `python -m minimind
bench` runs them all and writes RESULTS.md. Each can also run alone with
`python -m benchmarks.<name>`.
"""
