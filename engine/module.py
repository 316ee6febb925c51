"""Module: one model and its checkpoint.

Subclasses load their weights from a safetensors file (or, for procedural stand-ins,
from no file at all) and expose one call. A Module knows nothing of sessions; any
per-session memory it needs lives in the RollingState a Stage hands it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


class Module:
    """Base class: a named model with an optional safetensors checkpoint."""

    name: str = "module"

    def __init__(self, checkpoint: Path | None = None):
        self.checkpoint = checkpoint
        self.params: dict[str, np.ndarray] = self._load(checkpoint) if checkpoint else {}

    @staticmethod
    def _load(path: Path) -> dict[str, np.ndarray]:
        from safetensors.numpy import load_file

        return load_file(str(path))

    def initial_state(self, seed: int) -> dict[str, Any]:
        """Fresh per-session state (fixed size); empty for stateless modules."""
        return {}
