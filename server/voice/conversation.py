"""Conversation: chat mode. Hears the user, takes turns, answers through the LLM.

Microphone audio (16 kHz) -> TurnDetector -> at each pause, Whisper on the turn so far,
whose words decide when the turn ends (160 ms after a whole sentence, 1.2 s after one cut
off, 450 ms without words) -> `transcript` (user) -> the LLM's streamed reply ->
sentences (the first clause at once) -> TTS -> the session's SpeechQueue under one
utterance id. The user starting to talk while the avatar speaks interrupts it (barge-in)
through the session's one cancellation path; a user who goes on before a word of the
answer could have reached them (it had not begun, or began too recently for a reply to it)
gets one answer to everything they said, not one per piece.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import numpy as np

from server.stream.speech_queue import new_utterance_id
from server.voice.asr import AsrError, SpeechRecognizer
from server.voice.llm import ChatLLM, LlmError
from server.voice.turns import is_complete
from server.voice.vad import TurnDetector, TurnEvent, VadConfig
from speech.sentences import sentences_of

if TYPE_CHECKING:
    from server.events import EventHub
    from server.voice.utterances import Utterances

Spawn = Callable[[Coroutine[Any, Any, Any]], asyncio.Task]

log = logging.getLogger("server.voice.conversation")
HISTORY_MESSAGES = 12  # the LLM sees the last few turns; older ones are dropped
REACTION_MS = 200  # a listener's quickest reply to a sound: speech begun sooner is not one to the answer
NO_LLM = ("chat mode needs an LLM: start the server with AVATAR_LLM_BASE_URL "
          "(any OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1 for Ollama) and AVATAR_LLM_MODEL")


class Conversation:
    """One session's chat state; see the module docstring."""

    def __init__(self, hub: EventHub, utterances: Utterances, spawn: Spawn, asr: SpeechRecognizer, llm: ChatLLM,
                 vad: VadConfig = VadConfig()):
        """`spawn` runs a task that ends with the session (the turns it starts)."""
        self.hub, self.utterances, self.spawn = hub, utterances, spawn
        self.asr, self.llm, self.vad = asr, llm, vad
        self.detector = TurnDetector(vad)
        self.history: deque[dict] = deque(maxlen=HISTORY_MESSAGES)
        # The turn so far, recognised at its latest pause: its words decide when it ends,
        # and the end reuses it when no word came since (the voiced-frame count).
        self._early: tuple[int, asyncio.Future] | None = None
        self._turns = 0  # turns started: a turn whose user went on before its answer is not answered alone
        self._carry = ""  # words of a turn left unanswered that way: the next turn's beginning
        self._reply: tuple[str, str] | None = None  # the latest answer's utterance and the words it answers
        self._retracted: str | None = None  # an answer cut before a word of it was heard: not history
        self._recorded: tuple[str, int] = ("", 0)  # the latest answer in the history, and its entries

    def hear(self, pcm16k: np.ndarray) -> None:
        for event in self.detector.feed(pcm16k):
            if event.kind == "start":
                self._user_started(event.onset_ms)
            elif event.kind == "pause":
                self._recognise_early()
            else:
                self._end_turn(event)

    def _user_started(self, onset_ms: int) -> None:
        self._turns += 1
        self.hub.emit("user_speech_started")
        if not self.utterances.speaking:
            return
        reply, self._reply = self._reply, None
        if reply and self._went_on_first(reply[0], onset_ms):
            self._carry, self._retracted = f"{reply[1]} {self._carry}".strip(), reply[0]
            if self._recorded[0] == reply[0]:  # all of it was produced already, and recorded
                for _ in range(self._recorded[1]):
                    self.history.pop()
        self.utterances.interrupt()  # barge-in

    def _went_on_first(self, utterance_id: str, onset_ms: int) -> bool:
        """Whether the user went on before a word of the answer could have reached them: it
        had not begun when their voice did (the VAD's onset is heard only after it), or had
        played for less than anyone takes to react to it."""
        played = self.utterances.played_ms(utterance_id)
        if played is None:
            return not self.utterances.heard(utterance_id)
        return played - onset_ms < REACTION_MS

    def _recognise_early(self) -> None:
        if self._early is not None and not self._early[1].done():
            return  # one at a time: when it ends, a newer pause starts the next
        voiced = self.detector.voiced
        # the turn waits for its words: on a busy machine Whisper can take longer than the
        # usual hangover, and a turn ended before them would answer a sentence cut in half
        self.detector.hangover_ms = max(self.detector.hangover_ms, self.vad.incomplete_hangover_ms)
        early = asyncio.ensure_future(self.asr.transcribe(self.detector.audio()))
        early.add_done_callback(lambda f: self._decide(voiced, f))
        self._early = (voiced, early)

    def _decide(self, voiced: int, early: asyncio.Future) -> None:
        """When the turn ends, from its words so far: soon after a whole sentence, late
        after one cut off or trailing away, at the usual hangover without words."""
        detector = self.detector
        if not detector.speaking:
            return
        if early.cancelled() or early.exception() is not None:
            detector.hangover_ms = self.vad.hangover_ms  # no words to go by: the usual hangover
            return
        if detector.voiced != voiced:  # the speaker went on: these words are not the turn's
            if detector.silence_ms >= self.vad.pause_ms:
                self._recognise_early()
            return
        if not is_complete(early.result()):
            detector.hangover_ms = self.vad.incomplete_hangover_ms
        elif voiced < self.vad.sentence_frames:  # too little voice to trust a sentence in it
            detector.hangover_ms = self.vad.hangover_ms
        else:
            detector.hangover_ms = self.vad.complete_end_ms
        if detector.silence_ms >= detector.hangover_ms:
            self._end_turn(detector.end_now())

    def _end_turn(self, event: TurnEvent) -> None:
        self.hub.emit("user_speech_ended", silence_ms=event.silence_ms)
        assert event.audio is not None
        pending, self._early = self._early, None
        reuse = pending[1] if pending and pending[0] == event.voiced else None
        log.info("turn ended after %d ms of silence: %d voiced frames, early recognition %s", event.silence_ms,
                 event.voiced, "reused" if reuse else "not usable")
        self.spawn(self._turn(event.audio, reuse, self._turns))

    async def _turn(self, audio: np.ndarray, early: asyncio.Future | None, number: int) -> None:
        try:
            text = await (early or self.asr.transcribe(audio))
        except AsrError as exc:
            self.hub.emit("error", code="asr_failed", message=str(exc))
            return
        text, self._carry = f"{self._carry} {text}".strip(), ""
        if number != self._turns:  # the user spoke again meanwhile: one answer, to all of it
            self._carry = text
            return
        if not text:
            return
        self.hub.emit("transcript", role="user", text=text, final=True)
        if not self.llm.configured:
            self.hub.emit("error", code="llm_not_configured", message=NO_LLM)
            return
        utterance_id = new_utterance_id()
        self._reply = (utterance_id, text)
        self.utterances.produce(utterance_id, self._answer(utterance_id, text))

    async def _answer(self, utterance_id: str, question: str) -> None:
        words: list[str] = []
        asked = {"role": "user", "content": question}

        async def tokens() -> AsyncIterator[str]:
            async for token in self.llm.stream([*self.history, asked]):
                words.append(token)
                yield token

        try:
            await self.utterances.speak_sentences(utterance_id, sentences_of(tokens()))
        except LlmError as exc:
            self.hub.emit("error", code="llm_failed", message=str(exc))
        finally:
            reply = "".join(words).strip()
            if self._retracted == utterance_id:  # its question is asked again, whole, with the next turn
                self._retracted = None
            else:
                self.history.append(asked)
                if reply:  # what was said, even when a barge-in cut it short
                    self.history.append({"role": "assistant", "content": reply})
                    self.hub.emit("transcript", role="avatar", text=reply, final=True,
                                          utterance_id=utterance_id)
                self._recorded = (utterance_id, 2 if reply else 1)
