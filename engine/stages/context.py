"""Context generation: audio chunk -> per-frame audio features."""

from __future__ import annotations

from typing import Any

from ..modules.audio_features import AudioFeatureModule
from ..modules.mel_features import MelFeatureModule
from ..stage import AudioChunk, AudioFeatures, Stage


class ContextStage(Stage[AudioChunk, AudioFeatures]):
    name = "context"

    def __init__(self, features: AudioFeatureModule | MelFeatureModule):
        self.features = features

    def init_state(self, state: dict[str, Any], seed: int) -> None:
        state.update(self.features.initial_state(seed))

    def run(self, data: AudioChunk, state: dict[str, Any]) -> AudioFeatures:
        return AudioFeatures(data, self.features(data.pcm, data.frames, state))
