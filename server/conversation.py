"""Conversation: chat mode. Hears the user, takes turns, answers through the LLM.

Microphone audio (16 kHz) -> TurnDetector -> on the end of a turn, Whisper ->
`transcript` (user) -> the LLM's streamed reply -> sentences -> TTS -> the session's
SpeechQueue under one utterance id. The user starting to talk while the avatar speaks
interrupts it (barge-in) through the session's one cancellation path.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import numpy as np

from speech.sentences import sentences_of

from .audio_sources.asr import AsrError, SpeechRecognizer
from .audio_sources.llm import ChatLLM, LlmError
from .audio_sources.vad import TurnDetector, VadConfig
from .speech import new_utterance_id

if TYPE_CHECKING:
    from .session import Session

log = logging.getLogger("server.conversation")
HISTORY_MESSAGES = 12  # the LLM sees the last few turns; older ones are dropped
NO_LLM = ("chat mode needs an LLM: start the server with AVATAR_LLM_BASE_URL "
          "(any OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1 for Ollama) and AVATAR_LLM_MODEL")


class Conversation:
    """One session's chat state; see the module docstring."""

    def __init__(self, session: Session, asr: SpeechRecognizer, llm: ChatLLM, vad: VadConfig = VadConfig()):
        self.session, self.asr, self.llm = session, asr, llm
        self.detector = TurnDetector(vad)
        self.history: deque[dict] = deque(maxlen=HISTORY_MESSAGES)
        # Recognition started at a pause, reused if the turn then ends with no new words:
        # it overlaps the hangover instead of following it.
        self._early: tuple[int, asyncio.Future] | None = None

    def hear(self, pcm16k: np.ndarray) -> None:
        for event in self.detector.feed(pcm16k):
            if event.kind == "start":
                self.session.hub.emit("user_speech_started")
                if self.session.utterances.speaking:
                    self.session.utterances.interrupt()  # barge-in
            elif event.kind == "pause":
                assert event.audio is not None  # pauses and ends carry the turn's audio
                if self._early is None or self._early[1].done():
                    early = asyncio.ensure_future(self.asr.transcribe(event.audio))
                    early.add_done_callback(lambda f: f.cancelled() or f.exception())  # unused ones too
                    self._early = (event.voiced, early)
            else:
                self.session.hub.emit("user_speech_ended")
                assert event.audio is not None
                pending, self._early = self._early, None
                reuse = pending[1] if pending and pending[0] == event.voiced else None
                log.info("turn ended: %d voiced frames, early recognition %s", event.voiced,
                         "reused" if reuse else "not usable")
                self.session.spawn(self._turn(event.audio, reuse))

    async def _turn(self, audio: np.ndarray, early: asyncio.Future | None) -> None:
        try:
            text = await (early or self.asr.transcribe(audio))
        except AsrError as exc:
            self.session.hub.emit("error", code="asr_failed", message=str(exc))
            return
        if not text:
            return
        self.session.hub.emit("transcript", role="user", text=text, final=True)
        if not self.llm.configured:
            self.session.hub.emit("error", code="llm_not_configured", message=NO_LLM)
            return
        self.history.append({"role": "user", "content": text})
        utterance_id = new_utterance_id()
        self.session.utterances.produce(utterance_id, self._reply(utterance_id))

    async def _reply(self, utterance_id: str) -> None:
        words: list[str] = []

        async def tokens() -> AsyncIterator[str]:
            async for token in self.llm.stream(list(self.history)):
                words.append(token)
                yield token

        try:
            await self.session.utterances.speak_sentences(utterance_id, sentences_of(tokens()))
        except LlmError as exc:
            self.session.hub.emit("error", code="llm_failed", message=str(exc))
        finally:
            reply = "".join(words).strip()
            if reply:  # what was said, even when a barge-in cut it short
                self.history.append({"role": "assistant", "content": reply})
                self.session.hub.emit("transcript", role="avatar", text=reply, final=True,
                                      utterance_id=utterance_id)
