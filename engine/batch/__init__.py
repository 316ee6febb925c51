"""Batch mode: the same stages over a whole recording (runner.py) and the avatar-render CLI."""
