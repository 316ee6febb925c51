"""Routes of one session's life: create (JSON or WHEP), speak, interrupt, events, agent audio, delete."""

from __future__ import annotations

import asyncio

from aiohttp import WSMsgType, web

from server.errors import ApiError, parse_json, read_body, read_json
from server.events import event
from server.server import MODES, SERVER
from server.session import Session
from server.stream.signaling import MAX_SDP, answer, peer_connection, validate_offer
from server.voice.agent_ws import INTERRUPTS, parse_rate, serve_agent_audio
from server.voice.conversation import NO_LLM

MAX_TEXT = 5000
routes = web.RouteTableDef()


def _session(request: web.Request) -> Session:
    return request.app[SERVER].session(request.match_info["id"])


@routes.post("/v1/sessions")
async def create_session(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    body = await read_json(request)
    sdp = validate_offer(body)
    mode = body.get("mode", "tts")
    if mode not in MODES:
        raise ApiError(400, "bad_mode", f"'mode' must be one of {', '.join(MODES)}")
    session, local = await server.open_session(sdp, mode, body.get("avatar", "default"), request.remote)
    return web.json_response({"session_id": session.id, "sdp": local.sdp, "type": local.type}, status=201)


@routes.post("/v1/sessions/{id}/speak")
async def speak(request: web.Request) -> web.Response:
    session = _session(request)
    text = _text_field(await read_json(request))
    return web.json_response({"utterance_id": session.utterances.speak(text)}, status=202)


@routes.post("/v1/sessions/{id}/interrupt")
async def interrupt(request: web.Request) -> web.Response:
    session = _session(request)
    return web.json_response({"interrupted": session.utterances.interrupt()}, status=202)


@routes.post("/v1/sessions/{id}/broadcast")
async def start_broadcast(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    _session(request)  # a 404 before the body is read
    body = await read_json(request)
    target = await server.broadcast_targets.check(body.get("url"))
    session = _session(request)  # again: it may have ended meanwhile
    server.admit_broadcast(session)
    session.start_broadcast(target)
    return web.json_response({"broadcast": "starting", "target": target.public}, status=202)


@routes.delete("/v1/sessions/{id}/broadcast")
async def stop_broadcast(request: web.Request) -> web.Response:
    if not await _session(request).stop_broadcast():
        raise ApiError(404, "no_broadcast", "this session is not broadcasting")
    return web.Response(status=204)


@routes.post("/v1/sessions/{id}/viewers")
async def add_viewer(request: web.Request) -> web.Response:
    """WHEP for one more viewer of an existing session: an SDP offer in, the answer out."""
    server, session = request.app[SERVER], _session(request)
    sdp = await _sdp_offer(request)
    session = _session(request)  # again: it may have ended while the offer arrived
    pc = peer_connection(server.config)
    try:
        viewer = session.new_viewer(pc)
    except ApiError:
        await pc.close()
        raise
    try:
        local = await answer(pc, sdp, viewer.video, viewer.audio, hear=False)
        session = _session(request)  # it may have ended while ICE gathered: its viewers with it
    except BaseException:
        await session.drop_viewer(viewer.id)
        raise
    return web.Response(status=201, text=local.sdp, content_type="application/sdp",
                        headers={"Location": f"/v1/sessions/{session.id}/viewers/{viewer.id}"})


@routes.delete("/v1/sessions/{id}/viewers/{viewer}")
async def remove_viewer(request: web.Request) -> web.Response:
    if not await _session(request).drop_viewer(request.match_info["viewer"]):
        raise ApiError(404, "unknown_viewer", "no such viewer of this session")
    return web.Response(status=204)


@routes.delete("/v1/sessions/{id}")
async def delete_session(request: web.Request) -> web.Response:
    session = _session(request)
    await session.close()
    return web.Response(status=204)


@routes.get("/v1/sessions/{id}/events")
async def events(request: web.Request) -> web.WebSocketResponse:
    server = request.app[SERVER]
    session = _session(request)
    ws = web.WebSocketResponse(heartbeat=20)
    await ws.prepare(request)
    queue = session.hub.subscribe()
    if session.ttff_ms is not None:
        await ws.send_json(event(session.id, "first_frame", ttff_ms=round(session.ttff_ms, 1)))
    if session.mode == "chat" and not server.llm.configured:
        await ws.send_json(event(session.id, "error", code="llm_not_configured", message=NO_LLM))
    sender = asyncio.create_task(_forward(queue, ws))
    try:
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                await _client_message(session, ws, msg.data)
    finally:
        session.hub.unsubscribe(queue)
        sender.cancel()
    return ws


@routes.get("/v1/sessions/{id}/audio")
async def agent_audio(request: web.Request) -> web.WebSocketResponse:
    session = _session(request)
    return await serve_agent_audio(session, request, parse_rate(request))


@routes.post("/whep")
async def whep_create(request: web.Request) -> web.Response:
    """WHEP (RFC 9725): an SDP offer in, the answer out, and a resource to DELETE."""
    server = request.app[SERVER]
    sdp = await _sdp_offer(request)
    session, local = await server.open_session(sdp, "tts", "default", request.remote)
    return web.Response(status=201, text=local.sdp, content_type="application/sdp",
                        headers={"Location": f"/whep/{session.id}"})


@routes.delete("/whep/{id}")
async def whep_delete(request: web.Request) -> web.Response:
    await _session(request).close()
    return web.Response(status=200)  # WHEP's own answer to a DELETE, as its clients expect


async def _sdp_offer(request: web.Request) -> str:
    if request.content_type != "application/sdp":
        raise ApiError(415, "bad_content_type", "WHEP offers are sent as application/sdp")
    raw = await read_body(request, MAX_SDP, code="bad_sdp")
    return validate_offer({"sdp": raw.decode(errors="replace"), "type": "offer"})


async def _client_message(session: Session, ws: web.WebSocketResponse, data: str) -> None:
    try:
        message = parse_json(data, code="bad_message")
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "speak":  # answered as the agent socket answers audio: with the utterance's id
            utterance_id = session.utterances.speak(_text_field(message))
            await ws.send_json(event(session.id, "utterance", utterance_id=utterance_id))
        elif kind in INTERRUPTS:
            session.utterances.interrupt()
        else:
            raise ApiError(400, "bad_message", "messages are {'type': 'speak', 'text'} or {'type': 'interrupt'} "
                           "(also called 'clear_buffer')")
    except ApiError as exc:
        await ws.send_json(event(session.id, "error", code=exc.code, message=exc.message))


def _text_field(body: object) -> str:
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise ApiError(400, "bad_text", "field 'text' must be a non-empty string")
    if len(text) > MAX_TEXT:
        raise ApiError(413, "text_too_long", f"'text' is limited to {MAX_TEXT} characters")
    return text


async def _forward(queue: asyncio.Queue, ws: web.WebSocketResponse) -> None:
    while (event := await queue.get()) is not None:
        await ws.send_json(event)
    await ws.close()
