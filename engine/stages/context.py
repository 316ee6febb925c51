"""Context generation: audio chunk -> per-frame audio features."""

from __future__ import annotations

from typing import Any

from engine.core.stage import AudioChunk, AudioFeatures, Stage
from engine.families.motion.audio_features import AudioFeatureModule
from engine.families.motion.mel_features import MelFeatureModule


class ContextStage(Stage[AudioChunk, AudioFeatures]):
    name = "context"

    def __init__(self, features: AudioFeatureModule | MelFeatureModule):
        self.features = features

    def init_state(self, state: dict[str, Any], seed: int) -> None:
        state.update(self.features.initial_state(seed))

    def run(self, data: AudioChunk, state: dict[str, Any]) -> AudioFeatures:
        return AudioFeatures(data, self.features(data.pcm, data.frames, state))
