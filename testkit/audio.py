"""Audio files for fake microphones and generated speech."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .server import ARTIFACTS


def write_wav(path: Path, pcm: np.ndarray, rate: int = 48000) -> Path:
    """Mono PCM16 to a WAV file (fake microphones, generated speech)."""
    import wave

    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(pcm.astype(np.int16).tobytes())
    return path


def decoded(path: Path | str) -> np.ndarray:
    """A recording's sound (any container ffmpeg reads), 48 kHz mono int16."""
    import av

    with av.open(str(path)) as container:
        resampler = av.AudioResampler("s16", "mono", 48000)
        chunks = [f.to_ndarray().ravel() for frame in container.decode(audio=0) for f in resampler.resample(frame)]
    return np.concatenate(chunks).astype(np.int16)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(48000 * seconds), np.int16)


def speech_wav(name: str, *parts: np.ndarray) -> Path:
    """48 kHz parts, one after another, as a WAV file among the artifacts."""
    return write_wav(ARTIFACTS / name, np.concatenate(parts))
