"""LipClosure: the chance, frame by frame, that the lips are shut for a p, b or m (numpy).

The MotionDiT's mouth follows each syllable's energy, as real mouths do, but it often
leaves the brief full closure of a bilabial (two or three frames) a little parted:
regressed over many voices, a closure that the audio only hints at becomes an average.
This detector makes that one decision on its own. It reads the log-mel rows of the
frames around the one it judges (`context` before, `lookahead` after: the rows the
motion stage already holds) and was trained on force-aligned p/b/m of real and
synthetic speech (training/motion/closure.py). MotionStage shuts the published jaw by
its answer.

Network: a per-row projection shared across the rows, then a small MLP on the rows
side by side, one logit out; `members` such networks, trained from different seeds,
average their probabilities (one alone answers very differently from another on
recordings unlike the training speech, such as jfk.flac; their mean is steady).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from ..module import Module
from .mel_features import DIM as AUDIO_DIM

WEIGHTS = Path(__file__).resolve().parents[1] / "weights" / "lip_closure.safetensors"


@dataclass(frozen=True)
class LipClosureConfig:
    context: int = 6
    """Feature rows before the judged frame."""
    lookahead: int = 2
    """Rows after it: the MotionDiT's own lookahead, so the detector adds no latency."""
    row_dim: int = 32
    relative: bool = True
    """Also each band's level relative to its mean over the rows: a microphone's or a room's
    colour is nearly constant over 360 ms and cancels, the dip of a closure between vowels stays."""
    hidden: int = 64
    audio_dim: int = AUDIO_DIM
    members: int = 4

    @property
    def input_dim(self) -> int:
        return self.audio_dim * (2 if self.relative else 1)

    @property
    def rows(self) -> int:
        return self.context + 1 + self.lookahead


class LipClosure(Module):
    """`probability(rows)`: (N, rows, audio_dim) raw log-mel rows -> (N,) in 0..1."""

    name = "lip_closure"

    def __init__(self, checkpoint: Path = WEIGHTS):
        super().__init__(checkpoint)
        from safetensors import safe_open

        with safe_open(str(checkpoint), "numpy") as f:
            saved = json.loads(f.metadata()["config"])
        names = {f.name for f in fields(LipClosureConfig)}
        self.config = LipClosureConfig(**{k: v for k, v in saved.items() if k in names})
        self.p = {k: np.asarray(v, np.float32) for k, v in self.params.items()}

    @classmethod
    def from_params(cls, params: dict[str, np.ndarray], config: LipClosureConfig) -> "LipClosure":
        model = cls.__new__(cls)
        model.checkpoint, model.params, model.config = None, params, config
        model.p = {k: np.asarray(v, np.float32) for k, v in params.items()}
        return model

    def probability(self, rows: np.ndarray) -> np.ndarray:
        p = self.p
        x = (inputs(np.asarray(rows, np.float32), self.config.relative) - p["feature_mean"]) / p["feature_std"]
        return np.mean([self._member(x, f"members.{i}.") for i in range(self.config.members)], 0)

    def _member(self, x: np.ndarray, name: str) -> np.ndarray:
        p = self.p
        h = _gelu(x @ p[name + "row.weight"].T + p[name + "row.bias"]).reshape(len(x), -1)
        h = _gelu(h @ p[name + "fc1.weight"].T + p[name + "fc1.bias"])
        logit = h @ p[name + "fc2.weight"].T + p[name + "fc2.bias"]
        return 1 / (1 + np.exp(-logit[:, 0]))


def inputs(rows: np.ndarray, relative: bool) -> np.ndarray:
    """The network's rows: the log-mel rows, and with `relative` beside them their difference
    from their mean over the window (the same code runs on numpy arrays and torch tensors)."""
    if not relative:
        return rows
    centred = rows - rows.mean(1, keepdims=True)
    return np.concatenate([rows, centred], -1) if isinstance(rows, np.ndarray) else _cat(rows, centred)


def _cat(a, b):
    import torch

    return torch.cat([a, b], -1)


def _gelu(x: np.ndarray) -> np.ndarray:  # tanh approximation, as trained
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def config_metadata(config: LipClosureConfig) -> dict[str, str]:
    return {"config": json.dumps(asdict(config))}
