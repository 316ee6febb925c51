"""Session: one viewer's peer connection, its engine session, speech and playout.

The media pump keeps `lead` frames rendered ahead of the clock: each chunk takes
the next 80 ms of speech (or silence) from the SpeechQueue, renders it on the
engine worker, and queues the frames with that very audio for the Playout. A motion
model that listens ahead (`delay_frames`, its lookahead) returns the motion of frames
that much earlier, so the audio passes through a delay line of as many frames first.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import av
import numpy as np
from aiortc import RTCPeerConnection
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from engine.config import SAMPLE_RATE, SAMPLES_PER_FRAME
from speech.sentences import split_stream
from speech.tts import TextToSpeech, TtsError

from .engine_client import EngineError, EngineSession
from .errors import ApiError
from .events import EventHub
from .playout import AVFrame, Playout
from .speech import Mark, Piece, SpeechQueue, new_utterance_id
from .tracks import AvatarAudioTrack, AvatarVideoTrack

if TYPE_CHECKING:
    from .conversation import Conversation

log = logging.getLogger("server.session")

STATS_PERIOD_S = 1.0
MIRROR = "mirror"  # the SpeechQueue source id of the user's microphone
MIRROR_BACKLOG = 48_000 * 3 // 10  # 300 ms: older microphone audio is dropped, not queued
CONNECT_TIMEOUT_S = 10.0  # a peer that never pulls media does not hold capacity for long
PEER_SILENT_S = 6.0  # no RTCP receiver report for this long: the viewer is gone (tab closed)


class Session:
    """See the module docstring."""

    def __init__(self, session_id: str, pc: RTCPeerConnection, engine: EngineSession, tts: TextToSpeech,
                 hub: EventHub, size: int, chunk_frames: int, lead_frames: int, mode: str = "tts",
                 echo: bool = True, delay_frames: int = 0, max_queued: int = 16):
        self.id, self.pc, self.engine, self.tts, self.hub = session_id, pc, engine, tts, hub
        self.mode, self.echo, self.max_queued = mode, echo, max_queued
        self.conversation: Conversation | None = None  # set by the server in chat mode
        self.client: str | None = None  # the address that opened it (per-client limits)
        self.chunk_frames, self.lead = chunk_frames, max(lead_frames, chunk_frames)
        self.speech = SpeechQueue()
        silent: tuple[np.ndarray, list[Mark], list[str]] = (np.zeros(SAMPLES_PER_FRAME, np.int16), [], [])
        self._sound: deque[tuple[np.ndarray, list[Mark], list[str]]] = deque([silent] * delay_frames)
        self.playout = Playout(engine.frame, engine.release, self._on_marks, size)
        self.video = AvatarVideoTrack(self.playout, self._first_frame)
        self.audio = AvatarAudioTrack(self.playout)
        self.created = time.monotonic()
        self.closed = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self._speaking: dict[str, int] = {}  # utterance id -> frames played
        self._producers: dict[str, asyncio.Task] = {}  # utterance id -> task feeding its audio
        self._live: set[str] = set()  # utterances fed by pushed audio, still open
        self._texts: dict[str, str] = {}  # utterance id -> text, until it starts playing
        self.ttff_ms: float | None = None
        self.fps = 0.0  # video frames sent in the last stats period, per second
        self.fresh_fps = 0.0  # of those, newly rendered ones (the rest repeat a late engine's last frame)
        self.on_first_frame: Callable[[float], None] | None = None  # hooks for the server's metrics
        self.on_interrupt: Callable[[int], None] | None = None
        self.closed_task: asyncio.Task | None = None  # the server's, which forgets it once closed

    def start(self) -> None:
        self.spawn(self._pump())
        self.spawn(self._stats())
        self.spawn(self._connect_watchdog())
        self.pc.on("track", self._on_remote_track)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run a task that ends with the session."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- speech ----------------------------------------------------------------
    # Every utterance has one id from its source (text, LLM reply, agent audio) to the
    # playout; `interrupt` cancels them all through this one path.
    def speak(self, text: str) -> str:
        """Speak `text` sentence by sentence; returns the utterance id."""
        if len(self._producers) >= self.max_queued:
            raise ApiError(429, "speech_queue_full", f"this session already has {self.max_queued} utterances "
                           "waiting (max_queued_utterances); wait for speak_ended or interrupt")
        utterance_id = new_utterance_id()
        self._texts[utterance_id] = text
        self.produce(utterance_id, self.speak_sentences(utterance_id, split_stream(text)))
        return utterance_id

    def produce(self, utterance_id: str, producer: Coroutine[Any, Any, None]) -> None:
        """Run a coroutine that pushes an utterance's audio; it is cancelled by `interrupt`."""
        self._producers[utterance_id] = self.spawn(self._run_producer(utterance_id, producer))

    async def _run_producer(self, utterance_id: str, producer: Coroutine[Any, Any, None]) -> None:
        try:
            await producer
        except TtsError as exc:
            log.warning("session %s: speech synthesis failed: %s", self.id, exc)
            self.hub.emit("error", code="tts_failed", message=str(exc))
        finally:
            # interrupt() forgets its producers first: a cancelled one leaves no end mark
            still_ours = self._producers.pop(utterance_id, None) is not None
        if still_ours and not self.closed.is_set():
            self.speech.finish(utterance_id)

    async def speak_sentences(self, utterance_id: str, sentences: AsyncIterator[str]) -> None:
        async for sentence in sentences:
            if not await self.speech.push(utterance_id, await self.tts.synthesize(sentence, owner=self.id)):
                return

    def open_live(self) -> str:
        """An utterance fed by pushed audio (the agent socket); `push_audio` and `end_live` follow."""
        utterance_id = new_utterance_id()
        self._live.add(utterance_id)
        return utterance_id

    async def push_audio(self, utterance_id: str, pcm48: np.ndarray) -> bool:
        """Queue pushed audio; False once the utterance was interrupted."""
        if utterance_id not in self._live:
            return False
        return await self.speech.push(utterance_id, pcm48)

    def end_live(self, utterance_id: str) -> None:
        if utterance_id in self._live:
            self._live.discard(utterance_id)
            self.speech.finish(utterance_id)

    @property
    def speaking(self) -> bool:
        return bool(self._speaking or self._producers or self._live or self.speech.buffered)

    def interrupt(self) -> list[str]:
        """Cancel all speech now: its source, queued audio, and audio already rendered."""
        cancelled = set(self._producers) | self._live | set(self.speech.cancel()) | set(self._speaking)
        cancelled.discard(MIRROR)
        self.playout.mute(list(cancelled))  # before the producers' finally blocks: no end marks
        for task in list(self._producers.values()):
            task.cancel()
        self._producers.clear()
        self._live.clear()
        if self.on_interrupt and cancelled:
            self.on_interrupt(len(cancelled))
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
    def _on_remote_track(self, track: MediaStreamTrack) -> None:
        if track.kind != "audio":
            return
        if self.mode == "mirror":  # the user's voice drives the face as it arrives
            self.spawn(self._listen(track, SAMPLE_RATE,
                                     lambda pcm: self.speech.push_live(MIRROR, pcm, MIRROR_BACKLOG)))
        elif self.mode == "chat" and self.conversation is not None:
            self.spawn(self._listen(track, 16_000, self.conversation.hear))

    async def _listen(self, track: MediaStreamTrack, rate: int, sink: Callable[[np.ndarray], object]) -> None:
        resampler = av.AudioResampler("s16", "mono", rate)
        try:
            while not self.closed.is_set():
                frame = await track.recv()
                assert isinstance(frame, av.AudioFrame)  # only audio tracks are listened to
                for out in resampler.resample(frame):
                    sink(out.to_ndarray().reshape(-1))
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
                self._queue_frames(piece, rendered.slots)
                chunk_id, first = chunk_id + 1, first + self.chunk_frames
        except EngineError as exc:
            self.fail(exc.code, str(exc))
        except asyncio.CancelledError:
            pass

    def _queue_frames(self, piece: Piece, slots: list[int]) -> None:
        if self.closed.is_set():
            for slot in slots:
                self.engine.release(slot)
            return
        for i, slot in enumerate(slots):
            lo, hi = i * SAMPLES_PER_FRAME, (i + 1) * SAMPLES_PER_FRAME
            marks = [m for m in piece.marks if lo <= m.offset < hi or (m.offset == hi and i == len(slots) - 1)]
            self._sound.append((piece.pcm[lo:hi], marks, piece.utterances))
            pcm, marks, owners = self._sound.popleft()  # the audio of this frame's moment
            utterances = owners if pcm.any() else []
            if self.playout.muted.keys() & set(owners) or (not self.echo and MIRROR in utterances):
                pcm, marks, utterances = np.zeros_like(pcm), [], []
            self.playout.push(AVFrame(slot, pcm, marks, list(utterances)))

    async def _connect_watchdog(self) -> None:
        """Ends sessions whose viewer never connects or has gone away.

        A closed tab sends no DTLS close and ICE notices only after ~30 s; receiver
        reports stop at once, so a silent peer frees its worker much sooner.
        """
        while not self.closed.is_set():
            await asyncio.sleep(1.0)
            if self.video.first_frame_at is None:
                if time.monotonic() - self.created > CONNECT_TIMEOUT_S:
                    self.fail("not_connected",
                              f"no media was requested within {CONNECT_TIMEOUT_S:.0f} s; check ICE/TURN")
            elif await self._seconds_since_receiver_report() > PEER_SILENT_S:
                self.fail("peer_gone", "the viewer stopped answering")

    async def _seconds_since_receiver_report(self) -> float:
        latest = None
        for sender in self.pc.getSenders():
            for stat in (await sender.getStats()).values():
                if stat.type == "remote-inbound-rtp":
                    latest = max(latest or stat.timestamp, stat.timestamp)
        if latest is None:
            assert self.video.first_frame_at is not None  # only asked once media flows
            return time.monotonic() - self.video.first_frame_at
        return (datetime.datetime.now(datetime.UTC) - latest).total_seconds()

    async def _stats(self) -> None:
        last_sent, last_played, last_bytes, last_t = 0, 0, 0, time.monotonic()
        reported = (0, 0)  # packets lost and sent, by the video's latest receiver report
        while not self.closed.is_set():
            await asyncio.sleep(STATS_PERIOD_S)
            stats = await self._video_stats()
            reported = self._follow_video_loss(stats, reported)
            now, played = time.monotonic(), self.playout.stats.played
            sent_bytes = sum(s.bytesSent for s in stats if s.type == "outbound-rtp")  # what the encoder made
            self.fps = round((self.video.sent - last_sent) / (now - last_t), 2)
            self.fresh_fps = round((played - last_played) / (now - last_t), 2)
            video_kbps = round((sent_bytes - last_bytes) * 8 / 1000 / (now - last_t), 1)
            last_sent, last_played, last_bytes, last_t = self.video.sent, played, sent_bytes, now
            self.hub.emit("stats", fps=self.fps, fresh_fps=self.fresh_fps, queue_ms=self.playout.buffered * 40,
                          av_offset_ms=self.av_offset_ms(), held=self.playout.stats.held, video_kbps=video_kbps)

    async def _video_stats(self) -> list:
        for sender in self.pc.getSenders():
            if sender.track is self.video:
                return list((await sender.getStats()).values())
        return []

    def _follow_video_loss(self, stats: list, before: tuple[int, int]) -> tuple[int, int]:
        """Give the video's bitrate control the fraction lost since `before`, from the receiver
        reports' running totals (a browser's per-report fractions come from several reporters,
        some over a few milliseconds, so one report says little). The totals now (lost, sent)."""
        for stat in stats:
            if stat.type == "remote-inbound-rtp":
                now = (stat.packetsLost, stat.packetsLost + stat.packetsReceived)
                if now[1] > before[1]:
                    self.video.bitrate.loss(max(0, now[0] - before[0]) / (now[1] - before[1]), time.monotonic())
                return now
        return before

    def _first_frame(self) -> None:
        self.ttff_ms = (time.monotonic() - self.created) * 1000
        self.hub.emit("first_frame", ttff_ms=round(self.ttff_ms, 1))
        if self.on_first_frame:
            self.on_first_frame(self.ttff_ms / 1000)

    def av_offset_ms(self) -> float:
        """How much later than its video the audio left the server (both are due at t0 + media time)."""
        return round((self.audio.last_late - self.video.last_late) * 1000, 1)

    # --- end -------------------------------------------------------------------
    def fail(self, code: str, message: str) -> None:
        if not self.closed.is_set():
            log.warning("session %s failed: %s (%s)", self.id, code, message)
        self.hub.emit("error", code=code, message=message)
        self.spawn(self.close())

    async def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        log.info("session %s ended after %.1f s: %d frames played, %d held", self.id,
                 time.monotonic() - self.created, self.playout.stats.played, self.playout.stats.held)
        self.speech.close()  # producers waiting for queue space give up
        for task in list(self._tasks):
            if task is not asyncio.current_task():
                task.cancel()
        self.engine.close()
        self.playout.drain()
        self.hub.close()
        self.video.stop()
        self.audio.stop()
        await self.pc.close()
