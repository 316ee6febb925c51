"""Context generation: audio chunk -> per-frame audio features."""

from __future__ import annotations

from engine.core.stage import AudioChunk, AudioFeatures, Stage
from engine.families.motion.audio_features import AudioFeatureModule
from engine.families.motion.mel_features import AudioTail, MelFeatureModule


class ContextStage(Stage[AudioChunk, AudioFeatures, AudioTail]):
    name = "context"

    def __init__(self, features: AudioFeatureModule | MelFeatureModule):
        self.features = features

    def new_state(self, seed: int) -> AudioTail:
        return self.features.initial_state(seed)

    def run(self, data: AudioChunk, state: AudioTail) -> AudioFeatures:
        return AudioFeatures(data, self.features(data.pcm, data.frames, state))
