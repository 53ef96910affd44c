"""Reliability and security tests: bad inputs, properties, faults, cancellation, atomic files."""
