"""Server: what the routes share, the engine client, the TTS process, the avatar store and the
live sessions, with admission (capacity, per-address limits) and each session's start and end."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from pathlib import Path

from aiohttp import web
from aiortc import RTCSessionDescription

from engine.config import EngineConfig
from engine.facade import is_video_avatar, picture_delay_frames
from server.avatars import AvatarStore
from server.config import PHOTOS_ONLY, ServerConfig
from server.engines.client import Engine, EngineClient
from server.errors import ApiError
from server.metrics import Metrics
from server.publish.targets import TargetPolicy
from server.session import Session, SessionConfig, SessionHooks
from server.stream.signaling import answer, peer_connection
from server.voice.asr import SpeechRecognizer
from server.voice.llm import ChatLLM, LlmConfig
from speech.tts import PiperTts, TextToSpeech

log = logging.getLogger("server")
MODES = ("tts", "mirror", "chat")
RETRY_AFTER_S = 5


class Server:
    """Owns the engine client, the TTS process and the live sessions."""

    def __init__(self, config: ServerConfig, engine_config: EngineConfig = EngineConfig(),
                 tts: TextToSpeech | None = None):
        self.config = config
        self.engine_config = config.engine_settings(engine_config)
        self.sessions: dict[str, Session] = {}
        self.metrics = Metrics(config.max_sessions, self.sessions.values, lambda: self.engine.ready_workers,
                               lambda: self.engine.load())
        self.engine = self._engine_client()
        self.motion_delay = picture_delay_frames(self.engine_config)
        self.tts = tts or PiperTts(Path(config.tts_voice) if config.tts_voice else None)
        self.asr = SpeechRecognizer()
        self.llm = ChatLLM(LlmConfig(config.llm_base_url, config.llm_model, config.llm_api_key))
        self._asr_warm: asyncio.Task | None = None
        self._opening: dict[str | None, int] = {}  # sessions being answered, per client address
        self.broadcast_targets = TargetPolicy(config.broadcast_targets)
        self.avatars = AvatarStore(config.avatar, config.avatars_dir, config.max_avatars, self.engine_config.size)
        self.started = time.time()

    def _engine_client(self) -> Engine:
        restarted = self.metrics.worker_restarts.inc
        if self.config.engine == "ray":
            from server.engines.ray import Pool, RayEngineClient  # Ray is an optional extra

            c = self.config
            pool = Pool(c.workers, c.ray_worker_cpus, c.ray_worker_gpus, c.sessions_per_worker)
            return RayEngineClient(self.engine_config, pool, c.ray_address, c.video_bitrate, restarted)
        return EngineClient(self.engine_config, self.config.workers, on_restart=restarted)

    async def startup(self, app: web.Application) -> None:
        await asyncio.gather(self.engine.start(), self.tts.start())
        if self.llm.configured:  # chat can be asked for: Whisper loads now, not during the first question
            self._warm_asr()

    async def shutdown(self, app: web.Application) -> None:
        await asyncio.gather(*(s.close() for s in list(self.sessions.values())), return_exceptions=True)
        await self.engine.stop()
        await self.tts.close()
        await self.avatars.close()
        await self.llm.close()
        self.asr.close()

    def session(self, session_id: str) -> Session:
        """A live session, or the API's 404."""
        session = self.sessions.get(session_id)
        if session is None or session.closed.is_set():
            raise ApiError(404, "unknown_session", "no such session (it may have ended)")
        return session

    @property
    def occupied(self) -> int:
        """Places taken: live sessions and those still being answered."""
        return len(self.sessions) + sum(self._opening.values())

    def _admit(self, client: str | None) -> None:
        if not self.engine.ready_workers:  # a Ray cluster whose engine actors are all restarting or gone
            self.metrics.sessions_rejected.inc()
            raise ApiError(503, "engine_unavailable", "no engine worker is ready (restarting, or its machine is "
                           "gone); try again shortly", {"Retry-After": str(RETRY_AFTER_S)})
        cluster = self.engine.load()  # the Ray cluster's sessions from every front end, and its capacity
        if cluster and cluster[0] >= cluster[1]:
            self.metrics.sessions_rejected.inc()
            raise ApiError(503, "at_capacity", f"the engine cluster is full ({cluster[0]} of {cluster[1]} "
                           "sessions); try again shortly", {"Retry-After": str(RETRY_AFTER_S)})
        if self.occupied >= self.config.max_sessions:
            self.metrics.sessions_rejected.inc()
            raise ApiError(503, "at_capacity",
                           f"the server is at capacity ({self.config.max_sessions} sessions); try again shortly",
                           {"Retry-After": str(RETRY_AFTER_S)})
        limit = self.config.max_sessions_per_client
        theirs = sum(s.client == client for s in self.sessions.values()) + self._opening.get(client, 0)
        if limit and theirs >= limit:
            self.metrics.sessions_rejected.inc()
            raise ApiError(429, "too_many_sessions", f"this address already holds {limit} sessions "
                           "(max_sessions_per_client); close one first", {"Retry-After": str(RETRY_AFTER_S)})

    async def open_session(self, sdp: str, mode: str, avatar_id: object,
                           client: str | None) -> tuple[Session, RTCSessionDescription]:
        avatar = self.avatars.path(avatar_id)
        if self.config.photos_only and is_video_avatar(avatar):
            raise ApiError(422, "unsupported_avatar", PHOTOS_ONLY)
        self._admit(client)
        self._opening[client] = self._opening.get(client, 0) + 1  # counted while ICE gathers: no overshoot
        try:
            session = self._new_session(mode, avatar, client)
            try:
                local = await answer(session.pc, sdp, session.video, session.audio, hear=mode != "tts")
            except BaseException:
                await session.close()
                raise
        finally:
            self._opening[client] -= 1
            if not self._opening[client]:
                del self._opening[client]
        if not session.closed.is_set():  # one that failed meanwhile has been forgotten already
            self.sessions[session.id] = session
        self.metrics.sessions_created.inc()
        log.info("session %s started: mode %s, avatar %s, client %s", session.id, mode, avatar.name, client)
        return session, local

    def admit_broadcast(self, session: Session) -> None:
        """429 past the server's or this client's number of broadcasts at once."""
        running = [s for s in self.sessions.values() if s.broadcast is not None and s is not session]
        if len(running) >= self.config.max_broadcasts:
            raise ApiError(429, "too_many_broadcasts", f"this server runs {self.config.max_broadcasts} broadcasts "
                           "already (max_broadcasts)", {"Retry-After": str(RETRY_AFTER_S)})
        mine = sum(s.client == session.client for s in running)
        if mine >= self.config.max_broadcasts_per_client:
            raise ApiError(429, "too_many_broadcasts", f"this address runs {mine} broadcasts already "
                           "(max_broadcasts_per_client)", {"Retry-After": str(RETRY_AFTER_S)})

    def _new_session(self, mode: str, avatar: Path, client: str | None) -> Session:
        session_id = secrets.token_hex(8)
        engine = self.engine.open_session(session_id, str(avatar), secrets.randbits(31))
        config = SessionConfig(self.engine_config.frame, self.engine_config.chunk_frames, self.config.lead_frames,
                               mode, echo=bool(self.config.mirror_echo), delay_frames=self.motion_delay,
                               max_queued=self.config.max_queued_utterances, video_bitrate=self.config.video_bitrate,
                               max_viewers=self.config.max_viewers)
        hooks = SessionHooks(self.metrics.ttff.observe, self.metrics.interrupts.inc, self._forget)
        session = Session(session_id, peer_connection(self.config), engine, self.tts, config, client, hooks,
                          chat=(self.asr, self.llm))
        if mode == "chat":  # without an LLM configured it loads only now, while the user says hello
            self._warm_asr()
        session.start()  # render the first frames while ICE and DTLS run
        return session

    def _warm_asr(self) -> None:
        if self._asr_warm is None:
            self._asr_warm = asyncio.create_task(self.asr.warm())

    def _forget(self, session: Session) -> None:
        self.sessions.pop(session.id, None)
        self.metrics.session_closed(session.playout.stats)


SERVER = web.AppKey("server", Server)
