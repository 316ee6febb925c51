"""The aiohttp application: routes of api.md, static files, and startup/shutdown."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import replace
from pathlib import Path

from aiohttp import WSMsgType, web
from prometheus_client import CONTENT_TYPE_LATEST

from engine.config import EngineConfig, motion_delay_frames
from speech.tts import PiperTts, TextToSpeech

from . import encoder
from .audio_sources.agent_ws import parse_rate, serve_agent_audio
from .audio_sources.asr import SpeechRecognizer
from .audio_sources.llm import ChatLLM, LlmConfig
from .avatars import MAX_UPLOAD_BYTES, AvatarStore
from .config import ServerConfig
from .conversation import NO_LLM, Conversation
from .engine_client import EngineClient
from .errors import BODY_TIMEOUT_S, ApiError, error_middleware, parse_json, read_body, read_json
from .events import EventHub, event
from .metrics import Metrics
from .security import auth_middleware, cors_middleware
from .session import Session
from .signaling import MAX_SDP, answer, peer_connection, validate_offer

log = logging.getLogger("server")
ROOT = Path(__file__).resolve().parent.parent
MODES = ("tts", "mirror", "chat")
MAX_TEXT = 5000
RETRY_AFTER_S = 5


class Server:
    """Owns the engine client, the TTS process and the live sessions."""

    def __init__(self, config: ServerConfig, engine_config: EngineConfig = EngineConfig(),
                 tts: TextToSpeech | None = None):
        self.config = config
        self.engine_config = replace(engine_config, preload_avatar=str(config.avatar), motion=config.motion_model)
        self.engine = EngineClient(self.engine_config, config.workers)
        self.motion_delay = motion_delay_frames(self.engine_config.motion)
        self.tts = tts or PiperTts(Path(config.tts_voice) if config.tts_voice else None)
        self.sessions: dict[str, Session] = {}
        self.asr = SpeechRecognizer()
        self.llm = ChatLLM(LlmConfig(config.llm_base_url, config.llm_model, config.llm_api_key))
        self._asr_warm: asyncio.Task | None = None
        self._opening: dict[str | None, int] = {}  # sessions being answered, per client address
        self.metrics = Metrics(self)
        self.engine.on_restart = self.metrics.worker_restarts.inc
        self.avatars = AvatarStore(config.avatar, config.avatars_dir, config.max_avatars)
        self.started = time.time()

    async def startup(self, app: web.Application) -> None:
        encoder.install(self.config.video_bitrate)
        await asyncio.gather(self.engine.start(), self.tts.start())

    async def shutdown(self, app: web.Application) -> None:
        await asyncio.gather(*(s.close() for s in list(self.sessions.values())), return_exceptions=True)
        await self.engine.stop()
        await self.tts.close()
        self.avatars.close()
        self.asr.close()

    def session(self, request: web.Request) -> Session:
        session = self.sessions.get(request.match_info["id"])
        if session is None or session.closed.is_set():
            raise ApiError(404, "unknown_session", "no such session (it may have ended)")
        return session

    # --- routes ----------------------------------------------------------------
    async def create_session(self, request: web.Request) -> web.Response:
        body = await read_json(request)
        sdp = validate_offer(body)
        mode = body.get("mode", "tts")
        if mode not in MODES:
            raise ApiError(400, "bad_mode", f"'mode' must be one of {', '.join(MODES)}")
        session, local = await self.open_session(sdp, mode, body.get("avatar", "default"), request.remote)
        return web.json_response({"session_id": session.id, "sdp": local.sdp, "type": local.type}, status=201)

    async def whep_create(self, request: web.Request) -> web.Response:
        """WHEP (RFC 9725): an SDP offer in, the answer out, and a resource to DELETE."""
        if request.content_type != "application/sdp":
            raise ApiError(415, "bad_content_type", "WHEP offers are sent as application/sdp")
        raw = await read_body(request, MAX_SDP, code="bad_sdp")
        sdp = validate_offer({"sdp": raw.decode(errors="replace"), "type": "offer"})
        session, local = await self.open_session(sdp, "tts", "default", request.remote)
        return web.Response(status=201, text=local.sdp, content_type="application/sdp",
                            headers={"Location": f"/whep/{session.id}"})

    async def whep_delete(self, request: web.Request) -> web.Response:
        await self.session(request).close()
        return web.Response(status=200)

    @property
    def held(self) -> int:
        """Places taken: live sessions and those still being answered."""
        return len(self.sessions) + sum(self._opening.values())

    def _admit(self, client: str | None) -> None:
        if self.held >= self.config.max_sessions:
            self.metrics.sessions_rejected.inc()
            raise ApiError(503, "at_capacity",
                           f"the server is at capacity ({self.config.max_sessions} sessions); try again shortly",
                           {"Retry-After": str(RETRY_AFTER_S)})
        limit = self.config.max_sessions_per_client
        held = sum(s.client == client for s in self.sessions.values()) + self._opening.get(client, 0)
        if limit and held >= limit:
            self.metrics.sessions_rejected.inc()
            raise ApiError(429, "too_many_sessions", f"this address already holds {limit} sessions "
                           "(max_sessions_per_client); close one first", {"Retry-After": str(RETRY_AFTER_S)})

    async def open_session(self, sdp: str, mode: str, avatar_id: object,
                           client: str | None) -> tuple[Session, object]:
        avatar = self.avatars.path(avatar_id)
        self._admit(client)
        self._opening[client] = self._opening.get(client, 0) + 1  # counted while ICE gathers: no overshoot
        try:
            session = self._new_session(mode, avatar)
            session.client = client
            try:
                local = await answer(session.pc, sdp, session.video, session.audio, hear=mode != "tts")
            except BaseException:
                await session.close()
                raise
        finally:
            self._opening[client] -= 1
            if not self._opening[client]:
                del self._opening[client]
        self.sessions[session.id] = session
        self.metrics.sessions_created.inc()
        log.info("session %s started: mode %s, avatar %s, client %s", session.id, mode, avatar.name, client)
        session.pc.on("connectionstatechange", lambda: self._on_state(session))
        session.closed_task = asyncio.create_task(self._forget_when_closed(session))
        return session, local

    def _new_session(self, mode: str, avatar) -> Session:
        session_id = secrets.token_hex(8)
        engine = self.engine.open_session(session_id, str(avatar), seed=secrets.randbits(31),
                                          on_error=lambda e: None)
        session = Session(session_id, peer_connection(self.config), engine, self.tts, EventHub(session_id),
                          self.engine_config.size, self.engine_config.chunk_frames, self.config.lead_frames,
                          mode, echo=bool(self.config.mirror_echo), delay_frames=self.motion_delay,
                          max_queued=self.config.max_queued_utterances)
        engine.on_error = lambda exc: session.fail(exc.code, str(exc))
        session.on_first_frame = self.metrics.ttff.observe
        session.on_interrupt = self.metrics.interrupts.inc
        if mode == "chat":
            session.conversation = Conversation(session, self.asr, self.llm)
            if self._asr_warm is None:  # load Whisper while the user says hello
                self._asr_warm = asyncio.create_task(self.asr.warm())
        session.start()  # render the first frames while ICE and DTLS run
        return session

    def _on_state(self, session: Session) -> None:
        if session.pc.connectionState in ("failed", "closed"):
            asyncio.ensure_future(session.close())

    async def _forget_when_closed(self, session: Session) -> None:
        await session.closed.wait()
        self.sessions.pop(session.id, None)
        self.metrics.session_closed(session.playout.stats)

    async def speak(self, request: web.Request) -> web.Response:
        session = self.session(request)
        text = _text_field(await read_json(request))
        return web.json_response({"utterance_id": session.speak(text)}, status=202)

    async def interrupt(self, request: web.Request) -> web.Response:
        session = self.session(request)
        return web.json_response({"interrupted": session.interrupt()}, status=202)

    async def delete_session(self, request: web.Request) -> web.Response:
        session = self.session(request)
        await session.close()
        return web.Response(status=204)

    async def events(self, request: web.Request) -> web.WebSocketResponse:
        session = self.session(request)
        ws = web.WebSocketResponse(heartbeat=20)
        await ws.prepare(request)
        queue = session.hub.subscribe()
        if session.ttff_ms is not None:
            await ws.send_json(event(session.id, "first_frame", ttff_ms=round(session.ttff_ms, 1)))
        if session.mode == "chat" and not self.llm.configured:
            await ws.send_json(event(session.id, "error", code="llm_not_configured", message=NO_LLM))
        sender = asyncio.create_task(_forward(queue, ws))
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    await self._client_message(session, ws, msg.data)
        finally:
            session.hub.unsubscribe(queue)
            sender.cancel()
        return ws

    async def _client_message(self, session: Session, ws: web.WebSocketResponse, data: str) -> None:
        try:
            message = parse_json(data, code="bad_message")
            kind = message.get("type") if isinstance(message, dict) else None
            if kind == "speak":
                session.speak(_text_field(message))
            elif kind == "interrupt":
                session.interrupt()
            else:
                raise ApiError(400, "bad_message", "messages are {'type': 'speak', 'text'} or {'type': 'interrupt'}")
        except ApiError as exc:
            await ws.send_json(event(session.id, "error", code=exc.code, message=exc.message))

    async def agent_audio(self, request: web.Request) -> web.WebSocketResponse:
        session = self.session(request)
        return await serve_agent_audio(session, request, parse_rate(request))

    async def ice(self, request: web.Request) -> web.Response:
        """The STUN/TURN servers browsers should use too (behind NAT they need the same relay)."""
        c = self.config
        servers = [{"urls": list(c.ice_servers), **({"username": c.ice_username} if c.ice_username else {}),
                    **({"credential": c.ice_credential} if c.ice_credential else {})}] if c.ice_servers else []
        return web.json_response({"iceServers": servers})

    async def avatars_list(self, request: web.Request) -> web.Response:
        return web.json_response(self.avatars.listing())

    async def avatars_add(self, request: web.Request) -> web.Response:
        data = await _upload_bytes(request)
        return web.json_response({"avatar_id": await self.avatars.add(data)}, status=201)

    async def avatars_delete(self, request: web.Request) -> web.Response:
        self.avatars.delete(request.match_info["id"])
        return web.Response(status=204)

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({
            "status": "ok", "sessions": len(self.sessions), "max_sessions": self.config.max_sessions,
            "available": max(0, self.config.max_sessions - self.held),
            "workers": [{"index": w.index, "pid": w.process.pid, "sessions": len(w.sessions),
                         "free_slots": len(w.free)} for w in self.engine.workers],
            "worker_restarts": self.engine.restarts, "uptime_s": round(time.time() - self.started, 1),
        })

    async def metrics_page(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def index(self, request: web.Request) -> web.FileResponse:
        return web.FileResponse(ROOT / "static" / "index.html")


def _text_field(body: dict) -> str:
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ApiError(400, "bad_text", "field 'text' must be a non-empty string")
    if len(text) > MAX_TEXT:
        raise ApiError(413, "text_too_long", f"'text' is limited to {MAX_TEXT} characters")
    return text


async def _upload_bytes(request: web.Request) -> bytes:
    """The image of a multipart upload (first file part), or a raw image body."""
    if (request.content_length or 0) > MAX_UPLOAD_BYTES + 64 * 1024:
        raise ApiError(413, "image_too_large", f"images are limited to {MAX_UPLOAD_BYTES // 2**20} MB")
    if not request.content_type.startswith("multipart/"):
        return await read_body(request, MAX_UPLOAD_BYTES, code="image_too_large")
    try:
        async with asyncio.timeout(BODY_TIMEOUT_S):
            reader = await request.multipart()
            async for part in reader:
                if part.filename or part.name in ("image", "file"):
                    return await part.read(decode=False)
    except (ValueError, AssertionError) as exc:
        raise ApiError(400, "bad_upload", f"malformed multipart body: {exc}") from None
    except TimeoutError:
        raise ApiError(408, "body_timeout", f"the upload did not arrive within {BODY_TIMEOUT_S:.0f} s") from None
    raise ApiError(400, "bad_upload", "no image part in the upload (send it as field 'image')")


async def _forward(queue: asyncio.Queue, ws: web.WebSocketResponse) -> None:
    while (event := await queue.get()) is not None:
        await ws.send_json(event)
    await ws.close()


def _files(folder: Path):
    """Files under `folder`; a miss is the API's 404 body, like every other refusal."""
    folder = folder.resolve()

    async def handler(request: web.Request) -> web.FileResponse:
        path = (folder / request.match_info["path"]).resolve()
        if not path.is_relative_to(folder) or not path.is_file():
            raise ApiError(404, "not_found", f"no file {request.path}")
        return web.FileResponse(path)

    return handler


def create_app(config: ServerConfig, engine_config: EngineConfig = EngineConfig(),
               tts: TextToSpeech | None = None) -> web.Application:
    server = Server(config, engine_config, tts)
    middlewares = [cors_middleware(config.allowed_origins), error_middleware, auth_middleware(config.token)]
    app = web.Application(middlewares=middlewares, client_max_size=MAX_UPLOAD_BYTES + 64 * 1024)
    app["server"] = server
    app.on_startup.append(server.startup)
    app.on_shutdown.append(server.shutdown)
    app.router.add_get("/", server.index)
    app.router.add_get("/healthz", server.healthz)
    app.router.add_get("/favicon.ico", lambda request: web.Response(status=204))
    app.router.add_post("/v1/sessions", server.create_session)
    app.router.add_post("/v1/sessions/{id}/speak", server.speak)
    app.router.add_post("/v1/sessions/{id}/interrupt", server.interrupt)
    app.router.add_delete("/v1/sessions/{id}", server.delete_session)
    app.router.add_get("/v1/sessions/{id}/events", server.events)
    app.router.add_get("/v1/sessions/{id}/audio", server.agent_audio)
    app.router.add_get("/metrics", server.metrics_page)
    app.router.add_get("/v1/ice", server.ice)
    app.router.add_post("/whep", server.whep_create)
    app.router.add_delete("/whep/{id}", server.whep_delete)
    app.router.add_get("/v1/avatars", server.avatars_list)
    app.router.add_post("/v1/avatars", server.avatars_add)
    app.router.add_delete("/v1/avatars/{id}", server.avatars_delete)
    for prefix in ("static", "web"):
        app.router.add_get(f"/{prefix}/{{path:.+}}", _files(ROOT / prefix))
    return app
