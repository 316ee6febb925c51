"""Stages of the chunk loop, one file each."""
