"""Triage: the baseline of known limitations, new/known/fixed classification, the base-build check."""
