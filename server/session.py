"""Session: one viewer's peer connection, its engine session, speech and playout.

A Session composes the parts that each own one concern:
- Utterances (utterances.py): speech from its source to its last frame, and interruption;
- MediaPump (media_pump.py): renders the next chunk of speech or silence ahead of the clock;
- Playout (playout.py) and the tracks: one media clock for video and audio;
- SessionMonitor (monitor.py): the watchdog and the stats;
- the microphone (mirror and chat modes), here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import av
import numpy as np
from aiortc import RTCPeerConnection
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from media.clock import SAMPLE_RATE
from media.frame_size import FrameSize
from media.prompt_audio import listen_promptly
from media.resample import MonoResampler
from server.engines.client import EngineError, RenderSession
from server.errors import ApiError
from server.events import EventHub
from server.publish.broadcast import Broadcast
from server.publish.retry import Publisher
from server.publish.targets import Target
from server.publish.whip import WhipBroadcast
from server.stream.media_pump import MediaPump
from server.stream.monitor import CONNECT_TIMEOUT_S, SessionMonitor
from server.stream.playout import Playout
from server.stream.speech_queue import SpeechQueue
from server.stream.tracks import AvatarAudioTrack, AvatarVideoTrack
from server.stream.video_path import video_path
from server.stream.viewers import SharedEncoder, Viewer
from server.voice.conversation import Conversation
from server.voice.utterances import Utterances
from speech.tts import TextToSpeech

if TYPE_CHECKING:
    from server.voice.asr import SpeechRecognizer
    from server.voice.llm import ChatLLM

log = logging.getLogger("server.session")
VIEWER_CONNECT_S = CONNECT_TIMEOUT_S  # an added viewer that never connects frees its place as a session's offer does


@dataclass(frozen=True)
class SessionConfig:
    size: FrameSize  # streamed frames: a side, or (width, height)
    chunk_frames: int
    lead_frames: int
    mode: str = "tts"
    echo: bool = True  # mirror mode: play the user's voice back with the face
    delay_frames: int = 0  # the motion model's lookahead: the audio's delay line
    max_queued: int = 16  # utterances waiting, at most
    max_viewers: int = 16  # added viewers, at most
    video_bitrate: int = 1_200_000  # the most H.264 may send; a narrow link brings it down


@dataclass(frozen=True)
class SessionHooks:
    """What the server hears of a session: for its metrics, and to forget it once closed."""

    first_frame: Callable[[float], None] | None = None  # seconds from creation
    interrupted: Callable[[int], None] | None = None  # utterances cancelled
    closed: Callable[[Session], None] | None = None


class Session:
    """One viewer's session: composes its utterances, pump, playout, tracks and monitor, and
    owns its viewers, broadcast, microphone and end."""

    def __init__(self, session_id: str, pc: RTCPeerConnection, engine: RenderSession, tts: TextToSpeech,
                 config: SessionConfig, client: str | None = None, hooks: SessionHooks = SessionHooks(),
                 chat: tuple[SpeechRecognizer, ChatLLM] | None = None):
        self.id, self.pc, self.mode, self.client, self.hooks = session_id, pc, config.mode, client, hooks
        self.hub = EventHub(session_id)
        self.engine = engine
        engine.failure.add_done_callback(self._engine_failed)
        self.closed = asyncio.Event()
        self.failed = False
        self._tasks: set[asyncio.Task] = set()
        self.speech = SpeechQueue()
        self.playout = Playout(video_path(self.engine, config.size), self.engine.release,
                               self._on_marks, config.size)
        self.utterances = Utterances(session_id, self.speech, self.playout, self.hub, tts, self.spawn,
                                     self.closed, config.max_queued, hooks.interrupted)
        self.pump = MediaPump(self.engine, self.speech, self.playout, self.closed, config.chunk_frames,
                              config.lead_frames, config.delay_frames, config.echo)
        self.video = AvatarVideoTrack(self.playout, config.video_bitrate, self._first_frame)
        self.engine.follow(self.video.bitrate)
        self.video.keyframe_wanted = self.playout.path.want_keyframe
        self.audio = AvatarAudioTrack(self.playout)
        self.monitor = SessionMonitor(pc, self.video, self.audio, self.playout, self.hub, self.closed, self.fail)
        self.ttff_ms: float | None = None
        self.max_viewers = config.max_viewers
        self.broadcast: Publisher | None = None
        self.viewers: dict[str, Viewer] = {}  # added receive-only viewers, sharing one encode
        self._shared: SharedEncoder | None = None
        self.conversation = (Conversation(self.hub, self.utterances, self.spawn, *chat)
                             if chat and config.mode == "chat" else None)

    def start(self) -> None:
        self.spawn(self.pump.run(self.fail))
        self.spawn(self.monitor.run())
        self.pc.on("track", self._on_remote_track)
        self.pc.on("connectionstatechange", self._on_connection_state)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run a task that ends with the session."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _engine_failed(self, failure: asyncio.Future[EngineError]) -> None:
        if not failure.cancelled():
            self.fail(failure.result().code, str(failure.result()))

    def _on_marks(self, marks: list, utterances: list[str]) -> None:
        self.utterances.on_marks(marks, utterances)  # the playout is made before the utterances it serves

    # --- microphone ------------------------------------------------------------
    def _on_remote_track(self, track: MediaStreamTrack) -> None:
        if track.kind != "audio":
            return
        for receiver in self.pc.getReceivers():
            if receiver.track is track:
                listen_promptly(receiver)
        if self.mode == "mirror":  # the user's voice drives the face as it arrives
            self.spawn(self._listen(track, SAMPLE_RATE, self.utterances.mirror))
        elif self.mode == "chat" and self.conversation is not None:
            self.spawn(self._listen(track, 16_000, self.conversation.hear))

    async def _listen(self, track: MediaStreamTrack, rate: int, sink: Callable[[np.ndarray], object]) -> None:
        resampler = MonoResampler(rate)
        try:
            while not self.closed.is_set():
                frame = await track.recv()
                assert isinstance(frame, av.AudioFrame)  # only audio tracks are listened to
                for pcm in resampler.frame(frame):
                    sink(pcm)
        except MediaStreamError:
            pass

    def _first_frame(self) -> None:
        self.ttff_ms = (time.monotonic() - self.monitor.created) * 1000
        self.hub.emit("first_frame", ttff_ms=round(self.ttff_ms, 1))
        if self.hooks.first_frame:
            self.hooks.first_frame(self.ttff_ms / 1000)

    # --- end -------------------------------------------------------------------
    def _on_connection_state(self) -> None:
        if self.pc.connectionState in ("failed", "closed"):
            asyncio.ensure_future(self.close())

    def fail(self, code: str, message: str) -> None:
        if self.failed:  # one failure often comes twice: from the engine, and from the pump's render
            return
        self.failed = True
        if not self.closed.is_set():
            log.warning("session %s failed: %s (%s)", self.id, code, message)
        self.hub.emit("error", code=code, message=message)
        self.spawn(self.close())

    def start_broadcast(self, target: Target) -> None:
        """Publish this session as it plays: RTMP(S) (server/publish/broadcast.py) or WHIP (server/publish/whip.py).
        It ends with the session (close stops it)."""
        self._check_open()
        if self.broadcast is not None:
            raise ApiError(409, "broadcast_active", "this session is already broadcasting; DELETE it first")
        if target.scheme.startswith("rtmp"):
            self.broadcast = Broadcast(target, self.playout, self.hub.emit)
        else:
            self.broadcast = WhipBroadcast(target, self.playout, self.shared_encoder(), self.hub.emit)

    def _check_open(self) -> None:
        if self.closed.is_set():  # it ended while the request's body was arriving
            raise ApiError(404, "unknown_session", "no such session (it may have ended)")

    def shared_encoder(self) -> SharedEncoder:
        """The one H.264 encode of this session's added viewers and WHIP publisher."""
        if self._shared is None:
            self._shared = SharedEncoder(self.playout, self.video.bitrate.ceiling)
        return self._shared

    def new_viewer(self, pc: RTCPeerConnection) -> Viewer:
        """A receive-only viewer of this session (server/stream/viewers.py); the caller answers its offer."""
        self._check_open()
        if len(self.viewers) >= self.max_viewers:
            raise ApiError(429, "too_many_viewers", f"this session has its {self.max_viewers} viewers already "
                           "(max_viewers)", {"Retry-After": str(int(VIEWER_CONNECT_S))})
        shared = self.shared_encoder()
        viewer = Viewer(pc, self.playout, shared)
        self.viewers[viewer.id] = viewer
        shared.want_keyframe()  # its decoder starts here

        def gone() -> None:
            if pc.connectionState in ("failed", "closed"):
                asyncio.ensure_future(self.drop_viewer(viewer.id))

        pc.on("connectionstatechange", gone)
        self.spawn(self._expire(viewer))
        return viewer

    async def _expire(self, viewer: Viewer) -> None:
        await asyncio.sleep(VIEWER_CONNECT_S)
        if viewer.pc.connectionState != "connected":
            log.info("session %s: viewer %s never connected", self.id, viewer.id)
            await self.drop_viewer(viewer.id)

    async def drop_viewer(self, viewer_id: str) -> bool:
        viewer = self.viewers.pop(viewer_id, None)
        if viewer is not None:
            await viewer.close()
        return viewer is not None

    async def stop_broadcast(self) -> bool:
        broadcast, self.broadcast = self.broadcast, None
        if broadcast is None:
            return False
        await broadcast.stop()
        return True

    async def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        self.utterances.end()  # every utterance's sequence finishes, before the sockets close
        log.info("session %s ended after %.1f s: %d frames played, %d held", self.id,
                 time.monotonic() - self.monitor.created, self.playout.stats.played, self.playout.stats.held)
        self.speech.close()  # producers waiting for queue space give up
        for task in list(self._tasks):
            if task is not asyncio.current_task():
                task.cancel()
        await self.stop_broadcast()
        await asyncio.gather(*(self.drop_viewer(v) for v in list(self.viewers)))
        if self._shared:
            self._shared.close()
        self.engine.close()
        self.playout.drain()
        self.hub.close()
        self.video.stop()
        self.audio.stop()
        if self.hooks.closed:
            self.hooks.closed(self)
        await self.pc.close()
