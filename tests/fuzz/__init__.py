"""Hostile-input tests: schema fuzzing, hostile bodies and frames, limits and timeouts."""
