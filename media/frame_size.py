"""Frame sizes: a side (a square frame, every family's own output) or (width, height)."""

from __future__ import annotations

FrameSize = int | tuple[int, int]


def frame_dims(size: FrameSize) -> tuple[int, int]:
    """(width, height)."""
    return (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))
