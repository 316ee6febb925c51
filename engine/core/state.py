"""RollingState: all that survives from one chunk to the next in a session.

Only fixed-size arrays and scalars live here (audio history tail, filter states, the
idle-motion generator, the boundary motion frame); chunk data is dropped after
publish, so a session's memory does not depend on its length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class RollingState:
    """Per-session state of a Pipeline, one dict per stage."""

    next_frame: int = 0
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)

    def of(self, stage: str) -> dict[str, Any]:
        return self.stages.setdefault(stage, {})

    def nbytes(self) -> int:
        """Bytes held in arrays; constant over a session by construction."""
        return sum(v.nbytes for s in self.stages.values() for v in s.values() if isinstance(v, np.ndarray))
