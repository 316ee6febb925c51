"""Context generation: audio chunk -> per-frame audio features."""

from __future__ import annotations

from typing import Any

from engine.core.stage import AudioChunk, AudioFeatures, FeatureModule, Stage


class ContextStage(Stage[AudioChunk, AudioFeatures, Any]):
    name = "context"

    def __init__(self, features: FeatureModule):
        self.features = features

    def new_state(self, seed: int) -> Any:
        return self.features.initial_state(seed)

    def run(self, data: AudioChunk, state: Any) -> AudioFeatures:
        return AudioFeatures(data, self.features(data.pcm, data.frames, state))
