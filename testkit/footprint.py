"""The bytes a state holds, found by walking it: a field added later is counted too."""

from __future__ import annotations

import dataclasses
from collections import deque

import numpy as np


def footprint(value: object, seen: set[int] | None = None) -> int:
    """Bytes of every array, and the length of every container, reachable from `value`
    (dataclass fields, attributes, lists, tuples, deques, sets, dicts; each object once)."""
    seen = set() if seen is None else seen
    if id(value) in seen or value is None or isinstance(value, (int, float, str, bool, bytes)):
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, dict):
        return len(value) + sum(footprint(v, seen) for v in value.values())
    if isinstance(value, (list, tuple, set, frozenset, deque)):
        return len(value) + sum(footprint(v, seen) for v in value)
    if dataclasses.is_dataclass(value):
        return sum(footprint(getattr(value, f.name), seen) for f in dataclasses.fields(value))
    return sum(footprint(v, seen) for v in getattr(value, "__dict__", {}).values())
