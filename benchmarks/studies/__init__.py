"""Calibrations and one-off studies, each run alone: ``python -m benchmarks.studies.NAME``.

Each module's docstring opens with the question it answered; the answers, with the command
beside every figure, are in benchmarks/RESULTS.md, docs/results.md and docs/MATH.md.
"""
