"""Modules: one model each (or one procedural stand-in, named as such)."""
