"""Module: one model and its checkpoint.

Subclasses load their weights from a safetensors file (or, for procedural stand-ins,
from no file at all) and expose one call. A Module knows nothing of sessions; any
per-session memory it needs lives in the RollingState a Stage hands it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

C = TypeVar("C")
M = TypeVar("M", bound="Module")


class Module:
    """Base class: a named model with an optional safetensors checkpoint."""

    name: str = "module"
    config: Any  # a subclass's typed config dataclass, where it has one

    def __init__(self, checkpoint: Path | None = None):
        self.checkpoint = checkpoint
        self.params: dict[str, np.ndarray] = self._load(checkpoint) if checkpoint else {}

    @staticmethod
    def _load(path: Path) -> dict[str, np.ndarray]:
        from safetensors.numpy import load_file

        return load_file(str(path))

    @classmethod
    def from_params(cls: type[M], params: dict[str, np.ndarray], config: Any) -> M:
        """A model from in-memory weights and its config (tests, evaluation during training)."""
        model = cls.__new__(cls)
        model.checkpoint, model.params, model.config = None, params, config
        model.prepare()
        return model

    def prepare(self) -> None:
        """Whatever a subclass derives from `params` once, after loading or from_params."""

    def initial_state(self, seed: int) -> Any:
        """Fresh per-session state: a small dataclass of fixed-size arrays; None when stateless."""
        return None


def saved_config(checkpoint: Path, config_class: type[C]) -> C:
    """The config stored in a checkpoint's metadata, keeping the fields `config_class` has
    (older weights may carry settings that have moved elsewhere)."""
    from safetensors import safe_open

    with safe_open(str(checkpoint), "numpy") as f:
        saved = json.loads(f.metadata()["config"])
    names = {f.name for f in fields(config_class)}  # type: ignore[arg-type]
    return config_class(**{k: v for k, v in saved.items() if k in names})


def config_metadata(config: Any) -> dict[str, str]:
    """A dataclass config as the checkpoint metadata that saved_config reads back."""
    return {"config": json.dumps(asdict(config))}
