"""LipClosure: the chance, frame by frame, that the lips are shut for a p, b or m (numpy).

The MotionDiT's mouth follows each syllable's energy, as real mouths do, but it often
leaves the brief full closure of a bilabial (two or three frames) a little parted:
regressed over many voices, a closure that the audio only hints at becomes an average.
This detector makes that one decision on its own. It reads the log-mel rows of the
frames around the one it judges (`context` before, `lookahead` after: the rows the
motion stage already holds) and was trained on force-aligned p/b/m of real and
synthetic speech (training/motion/closure.py). MotionStage shuts the published jaw by
its answer.

Each row goes in beside its difference from the rows' mean: a microphone's or a room's
colour is nearly constant over 360 ms and cancels there, the dip of a closure between
vowels stays. Network: a per-row projection shared across the rows, then a small MLP
on the rows side by side, one logit out; `members` such networks, trained from
different initial weights, average their probabilities (one alone answers very
differently from another on recordings unlike the training speech, such as jfk.flac;
their mean is steady).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.core.module import Module, saved_config
from engine.families.motion.dit import gelu
from engine.families.motion.mel_features import DIM as AUDIO_DIM
from engine.package_files import package_path

WEIGHTS = package_path("engine", "weights", "lip_closure.safetensors")


@dataclass(frozen=True)
class LipClosureConfig:
    context: int = 6
    """Feature rows before the judged frame."""
    lookahead: int = 2
    """Rows after it: the MotionDiT's own lookahead, so the detector adds no latency."""
    row_dim: int = 32
    hidden: int = 64
    audio_dim: int = AUDIO_DIM
    members: int = 4

    @property
    def input_dim(self) -> int:
        return 2 * self.audio_dim  # each row and its difference from the rows' mean

    @property
    def rows(self) -> int:
        return self.context + 1 + self.lookahead


class LipClosure(Module):
    """`probability(rows)`: (N, rows, audio_dim) raw log-mel rows -> (N,) in 0..1."""

    name = "lip_closure"

    def __init__(self, checkpoint: Path = WEIGHTS):
        super().__init__(checkpoint)
        self.config = saved_config(checkpoint, LipClosureConfig)
        self.prepare()

    def prepare(self) -> None:
        self.p = {k: np.asarray(v, np.float32) for k, v in self.params.items()}

    def probability(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, np.float32)
        x = np.concatenate([rows, rows - rows.mean(1, keepdims=True)], -1)
        x = (x - self.p["feature_mean"]) / self.p["feature_std"]
        return np.mean([self._member(x, f"members.{i}.") for i in range(self.config.members)], 0)

    def _member(self, x: np.ndarray, name: str) -> np.ndarray:
        p = self.p
        h = gelu(x @ p[name + "row.weight"].T + p[name + "row.bias"]).reshape(len(x), -1)
        h = gelu(h @ p[name + "fc1.weight"].T + p[name + "fc1.bias"])
        logit = h @ p[name + "fc2.weight"].T + p[name + "fc2.bias"]
        return 1 / (1 + np.exp(-logit[:, 0]))
