"""RollingState: all that survives from one chunk to the next in a session.

Only fixed-size arrays and scalars live here (audio history tail, filter states, the
idle-motion generator, the boundary motion window), one small dataclass per stage;
chunk data is dropped after publish, so a session's memory does not depend on its length.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class RollingState:
    """Per-session state of a Pipeline: each stage's own state, by stage name."""

    next_frame: int = 0
    stages: dict[str, Any] = field(default_factory=dict)

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array held, by "stage.field" (one level of nested dataclasses too)."""
        out: dict[str, np.ndarray] = {}
        for name, state in self.stages.items():
            _collect(name, state, out)
        return out

    def nbytes(self) -> int:
        """Bytes held in arrays; constant over a session by construction."""
        return sum(a.nbytes for a in self.arrays().values())


def _collect(prefix: str, state: Any, out: dict[str, np.ndarray]) -> None:
    if isinstance(state, np.ndarray):
        out[prefix] = state
    elif dataclasses.is_dataclass(state) and not isinstance(state, type):
        for f in dataclasses.fields(state):
            _collect(f"{prefix}.{f.name}", getattr(state, f.name), out)
