"""Pinpointing: which pass (localize), the smallest failing model (reduce), the repro bundle."""
