"""A ring of a stream's last values: fixed in size, so a session's state never grows.

The ring is a preallocated array and `written` a (1,) count of every value ever written,
both held in a stage's state; the ring's order is not kept, as only its distribution is read.
"""

from __future__ import annotations

import numpy as np


def remember(ring: np.ndarray, written: np.ndarray, values: np.ndarray) -> None:
    """Write `values` over the oldest entries (no more at once than the ring holds)."""
    ring[(written[0] + np.arange(len(values))) % len(ring)] = values
    written[0] += len(values)


def recent(ring: np.ndarray, written: np.ndarray) -> np.ndarray:
    """The entries written so far: the whole ring once it has filled."""
    return ring[: min(int(written[0]), len(ring))]
