"""TurnDetector: webrtcvad on 20 ms frames at 16 kHz, with onset and hangover.

Speech starts after `onset` voiced frames out of the last `window`; it ends after
`hangover_ms` without voice, unless its owner decides sooner (`end_now`) or later (a
longer `hangover_ms` for this turn): the Conversation does, from what was said so far.
The turn's audio (with a little lead-in) is returned at the end, capped in length so a
never-ending talker cannot grow memory.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

RATE = 16_000
FRAME = RATE // 50  # 20 ms


@dataclass(frozen=True)
class VadConfig:
    aggressiveness: int = 2
    """webrtcvad mode 0-3; higher rejects more noise."""
    min_level_dbfs: float = -50.0
    """Quieter frames are never speech: webrtcvad alone fires on faint steady noise."""
    onset_frames: int = 4
    """Voiced frames among the last `window_frames` that start a turn (80 ms)."""
    window_frames: int = 6
    hangover_ms: int = 450
    """Silence that ends a turn when its words do not decide sooner or later."""
    pause_ms: int = 80
    """Silence after which a "pause" event offers the turn so far for recognition."""
    complete_end_ms: int = 160
    """Silence that ends a turn whose words so far are a complete sentence."""
    incomplete_hangover_ms: int = 1200
    """Silence that ends a turn whose words stop mid-sentence or trail off ("and", "the", "um", a comma)."""
    sentence_frames: int = 10
    """Voiced frames (200 ms) a turn needs before a whole sentence in its words ends it at
    `complete_end_ms`: in less, Whisper hears "Thanks." in a breath (a read address, 6 frames)."""
    lead_in_ms: int = 200
    """Audio kept from before the onset, so the first syllable reaches the recogniser."""
    max_turn_s: float = 30.0


@dataclass
class TurnEvent:
    kind: str  # "start" | "pause" | "end"
    audio: np.ndarray | None = None  # 16 kHz int16, the turn so far, on "pause" and "end"
    voiced: int = 0  # voiced frames in the turn so far: equal counts mean the same words
    silence_ms: int = 0  # on "end": how long after the last voiced frame the turn ended
    onset_ms: int = 0  # on "start": how long before it the first voiced frame of the onset came


class TurnDetector:
    """Feed 16 kHz int16 audio of any length; get start/end events."""

    def __init__(self, config: VadConfig = VadConfig()):
        import webrtcvad

        self.config = config
        self._vad = webrtcvad.Vad(config.aggressiveness)
        self._pending = np.zeros(0, np.int16)
        self._recent: deque[bool] = deque(maxlen=config.window_frames)
        self._before: deque[np.ndarray] = deque(maxlen=config.lead_in_ms // 20)
        self._turn: list[np.ndarray] = []
        self._silent_frames = 0
        self._voiced = 0
        self.speaking = False
        self.hangover_ms = config.hangover_ms  # this turn's; its owner may change it

    @property
    def voiced(self) -> int:
        return self._voiced

    @property
    def silence_ms(self) -> int:
        return self._silent_frames * 20

    def audio(self) -> np.ndarray:
        """The turn so far (16 kHz int16)."""
        return np.concatenate(self._turn) if self._turn else np.zeros(0, np.int16)

    def end_now(self) -> TurnEvent:
        """End the turn here (its words are complete): the "end" event, with its audio."""
        event = TurnEvent("end", self.audio(), self._voiced, self.silence_ms)
        self.speaking, self._turn = False, []
        self._recent.clear()
        self._before.clear()
        return event

    def feed(self, pcm: np.ndarray) -> list[TurnEvent]:
        self._pending = np.concatenate([self._pending, pcm.astype(np.int16)])
        events = []
        while len(self._pending) >= FRAME:
            frame, self._pending = self._pending[:FRAME], self._pending[FRAME:]
            event = self._frame(frame)
            if event:
                events.append(event)
        return events

    def is_voiced(self, frame: np.ndarray) -> bool:
        """Whether one 20 ms frame (16 kHz int16) is voice: webrtcvad, above the level gate."""
        level = 20 * np.log10(np.sqrt(np.mean(frame.astype(np.float32) ** 2)) / 32768 + 1e-9)
        return bool(level > self.config.min_level_dbfs and self._vad.is_speech(frame.tobytes(), RATE))

    def _frame(self, frame: np.ndarray) -> TurnEvent | None:
        voiced = self.is_voiced(frame)
        self._recent.append(voiced)
        if not self.speaking:
            self._before.append(frame)
            if sum(self._recent) >= self.config.onset_frames:
                self.speaking, self._silent_frames, self._voiced = True, 0, sum(self._recent)
                self._turn, self.hangover_ms = list(self._before), self.config.hangover_ms
                return TurnEvent("start", onset_ms=(len(self._recent) - list(self._recent).index(True)) * 20)
            return None
        self._turn.append(frame)
        self._silent_frames = 0 if voiced else self._silent_frames + 1
        self._voiced += voiced
        too_long = len(self._turn) * 20 > self.config.max_turn_s * 1000
        if self.silence_ms >= self.hangover_ms or too_long:
            return self.end_now()
        if voiced:  # words again: what was decided on the words before no longer holds
            self.hangover_ms = self.config.hangover_ms
        if self.silence_ms == self.config.pause_ms:
            return TurnEvent("pause", self.audio(), self._voiced)
        return None
