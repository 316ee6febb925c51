"""Session: one viewer's peer connection, its engine session, speech and playout.

The media pump keeps `lead` frames rendered ahead of the clock: each chunk takes
the next 80 ms of speech (or silence) from the SpeechQueue, renders it on the
engine worker, and queues the frames with that very audio for the Playout.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
import uuid

import av
import numpy as np
from aiortc import RTCPeerConnection
from aiortc.mediastreams import MediaStreamError

from engine.config import SAMPLE_RATE, SAMPLES_PER_FRAME

from .audio_sources.tts import TextToSpeech, TtsError, stream_speech
from .engine_client import EngineError, EngineSession
from .events import EventHub
from .playout import AVFrame, Playout
from .speech import Mark, Piece, SpeechQueue
from .tracks import AvatarAudioTrack, AvatarVideoTrack

log = logging.getLogger("server.session")
STATS_PERIOD_S = 1.0
MIRROR = "mirror"  # the SpeechQueue source id of the user's microphone
MIRROR_BACKLOG = 48_000 * 3 // 10  # 300 ms: older microphone audio is dropped, not queued
CONNECT_TIMEOUT_S = 30.0  # a peer that never pulls media does not hold a worker forever
PEER_SILENT_S = 6.0  # no RTCP receiver report for this long: the viewer is gone (tab closed)


class Session:
    """See the module docstring."""

    def __init__(self, session_id: str, pc: RTCPeerConnection, engine: EngineSession, tts: TextToSpeech,
                 hub: EventHub, size: int, chunk_frames: int, lead_frames: int, mode: str = "tts",
                 echo: bool = True):
        self.id, self.pc, self.engine, self.tts, self.hub = session_id, pc, engine, tts, hub
        self.mode, self.echo = mode, echo
        self.chunk_frames, self.lead = chunk_frames, max(lead_frames, chunk_frames)
        self.speech = SpeechQueue()
        self.playout = Playout(engine.frame, engine.release, self._on_marks, size)
        self.video = AvatarVideoTrack(self.playout, self._first_frame)
        self.audio = AvatarAudioTrack(self.playout)
        self.created = time.monotonic()
        self.closed = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self._speaking: dict[str, int] = {}  # utterance id -> frames played
        self._tts_tasks: dict[str, asyncio.Task] = {}
        self._texts: dict[str, str] = {}  # utterance id -> text, until it starts playing
        self.ttff_ms: float | None = None

    def start(self) -> None:
        self._spawn(self._pump())
        self._spawn(self._stats())
        self._spawn(self._connect_watchdog())
        self.pc.on("track", self._on_remote_track)

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- speech ----------------------------------------------------------------
    def speak(self, text: str) -> str:
        utterance_id = uuid.uuid4().hex[:12]
        self._tts_tasks[utterance_id] = self._spawn(self._speak(utterance_id, text))
        self._texts[utterance_id] = text
        return utterance_id

    async def _speak(self, utterance_id: str, text: str) -> None:
        try:
            async for pcm in stream_speech(self.tts, text):
                await self.speech.push(utterance_id, pcm)
        except TtsError as exc:
            self.hub.emit("error", code="tts_failed", message=str(exc))
        finally:
            self._tts_tasks.pop(utterance_id, None)
            if not self.closed.is_set():
                self.speech.finish(utterance_id)

    def interrupt(self) -> list[str]:
        """Cancel all speech now: synthesis, queued audio, and audio already rendered."""
        cancelled = set(self._tts_tasks)
        for task in list(self._tts_tasks.values()):
            task.cancel()
        self._tts_tasks.clear()
        cancelled.update(self.speech.cancel())
        cancelled.update(self._speaking)
        self.playout.mute(list(cancelled))
        for utterance_id in cancelled:
            self._texts.pop(utterance_id, None)
            played = self._speaking.pop(utterance_id, 0)
            self.hub.emit("interrupted", utterance_id=utterance_id, played_ms=played * 40)
        return sorted(cancelled)

    def _on_marks(self, marks: list[Mark], utterances: list[str]) -> None:
        for utterance_id in utterances:
            if utterance_id in self._speaking:
                self._speaking[utterance_id] += 1
        for mark in marks:
            if mark.kind == "start" and mark.utterance_id not in self.playout.muted:
                self._speaking[mark.utterance_id] = 0
                self.hub.emit("speak_started", utterance_id=mark.utterance_id)
                text = self._texts.pop(mark.utterance_id, None)
                if text:
                    self.hub.emit("transcript", role="avatar", text=text, final=True,
                                  utterance_id=mark.utterance_id)
            elif mark.kind == "end" and self._speaking.pop(mark.utterance_id, None) is not None:
                self.hub.emit("speak_ended", utterance_id=mark.utterance_id)

    # --- microphone ------------------------------------------------------------
    def _on_remote_track(self, track) -> None:
        if track.kind == "audio" and self.mode == "mirror":
            self._spawn(self._mirror(track))

    async def _mirror(self, track) -> None:
        """Mirror mode: the user's voice drives the face as it arrives."""
        resampler = av.AudioResampler("s16", "mono", SAMPLE_RATE)
        try:
            while not self.closed.is_set():
                frame = await track.recv()
                for out in resampler.resample(frame):
                    self.speech.push_live(MIRROR, out.to_ndarray().reshape(-1), MIRROR_BACKLOG)
        except MediaStreamError:
            pass

    # --- media pump ------------------------------------------------------------
    async def _pump(self) -> None:
        try:
            await self.engine.wait_open()
            chunk_id, first = 0, 0
            while not self.closed.is_set():
                while self.playout.buffered + self.chunk_frames > self.lead:
                    self.playout.consumed.clear()
                    await self.playout.consumed.wait()
                piece = self.speech.read(self.chunk_frames * SAMPLES_PER_FRAME)
                rendered = await self.engine.render(chunk_id, first, piece.pcm, self.chunk_frames)
                self._queue_frames(piece, rendered.slots, rendered.jaw)
                chunk_id, first = chunk_id + 1, first + self.chunk_frames
        except EngineError as exc:
            self.fail(exc.code, str(exc))
        except asyncio.CancelledError:
            pass

    def _queue_frames(self, piece: Piece, slots: list[int], jaw: list[float]) -> None:
        if self.closed.is_set():
            for slot in slots:
                self.engine.release(slot)
            return
        for i, slot in enumerate(slots):
            lo, hi = i * SAMPLES_PER_FRAME, (i + 1) * SAMPLES_PER_FRAME
            marks = [m for m in piece.marks if lo <= m.offset < hi or (m.offset == hi and i == len(slots) - 1)]
            pcm = piece.pcm[lo:hi]
            utterances = piece.utterances if pcm.any() else []
            if self.playout.muted.intersection(piece.utterances) or (not self.echo and MIRROR in utterances):
                pcm, marks, utterances = np.zeros_like(pcm), [], []
            self.playout.push(AVFrame(slot, pcm, marks, list(utterances), jaw[i]))

    async def _connect_watchdog(self) -> None:
        """Ends sessions whose viewer never connects or has gone away.

        A closed tab sends no DTLS close and ICE notices only after ~30 s; receiver
        reports stop at once, so a silent peer frees its worker much sooner.
        """
        while not self.closed.is_set():
            await asyncio.sleep(1.0)
            if self.video.first_frame_at is None:
                if time.monotonic() - self.created > CONNECT_TIMEOUT_S:
                    self.fail("not_connected", f"no media was requested within {CONNECT_TIMEOUT_S:.0f} s; check ICE/TURN")
            elif await self._seconds_since_receiver_report() > PEER_SILENT_S:
                self.fail("peer_gone", "the viewer stopped answering")

    async def _seconds_since_receiver_report(self) -> float:
        latest = None
        for sender in self.pc.getSenders():
            for stat in (await sender.getStats()).values():
                if stat.type == "remote-inbound-rtp":
                    latest = max(latest or stat.timestamp, stat.timestamp)
        if latest is None:
            return time.monotonic() - self.video.first_frame_at
        return (datetime.datetime.now(datetime.timezone.utc) - latest).total_seconds()

    async def _stats(self) -> None:
        last_sent, last_t = 0, time.monotonic()
        while not self.closed.is_set():
            await asyncio.sleep(STATS_PERIOD_S)
            now = time.monotonic()
            fps = (self.video.sent - last_sent) / (now - last_t)
            last_sent, last_t = self.video.sent, now
            self.hub.emit("stats", fps=round(fps, 2), queue_ms=self.playout.buffered * 40,
                          av_offset_ms=self.av_offset_ms(), held=self.playout.stats.held)

    def _first_frame(self) -> None:
        self.ttff_ms = (time.monotonic() - self.created) * 1000
        self.hub.emit("first_frame", ttff_ms=round(self.ttff_ms, 1))

    def av_offset_ms(self) -> float:
        """How much later than its video the audio left the server (both are due at t0 + media time)."""
        return round((self.audio.last_late - self.video.last_late) * 1000, 1)

    # --- end -------------------------------------------------------------------
    def fail(self, code: str, message: str) -> None:
        self.hub.emit("error", code=code, message=message)
        self._spawn(self.close())

    async def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for task in list(self._tasks):
            if task is not asyncio.current_task():
                task.cancel()
        self.engine.close()
        self.playout.drain()
        self.hub.close()
        self.video.stop()
        self.audio.stop()
        await self.pc.close()
