"""SDP offer -> answer for a new session: validation, transceivers, codec preference."""

from __future__ import annotations

from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCRtpSender, RTCSessionDescription

from .config import ServerConfig
from .errors import ApiError

MAX_SDP = 64 * 1024


def validate_offer(body: dict) -> str:
    sdp, kind = body.get("sdp"), body.get("type", "offer")
    if not isinstance(sdp, str) or not sdp.strip():
        raise ApiError(400, "bad_sdp", "field 'sdp' must be a non-empty SDP offer string")
    if kind != "offer":
        raise ApiError(400, "bad_sdp", "field 'type' must be 'offer'")
    if len(sdp) > MAX_SDP:
        raise ApiError(413, "bad_sdp", "SDP offer too large")
    if not sdp.lstrip().startswith("v=0") or "\nm=" not in sdp:
        raise ApiError(400, "bad_sdp", "'sdp' is not an SDP offer (expected 'v=0' and media lines)")
    if "m=video" not in sdp:
        raise ApiError(400, "bad_sdp", "the offer has no video media line; add a recvonly video transceiver")
    return sdp


def peer_connection(config: ServerConfig) -> RTCPeerConnection:
    servers = [RTCIceServer(urls=list(config.ice_servers), username=config.ice_username or None,
                            credential=config.ice_credential or None)] if config.ice_servers else []
    return RTCPeerConnection(RTCConfiguration(iceServers=servers))


def _prefer_h264(transceiver) -> None:
    codecs = RTCRtpSender.getCapabilities("video").codecs
    h264 = [c for c in codecs if c.mimeType.lower() == "video/h264"]
    rest = [c for c in codecs if c.mimeType.lower() != "video/h264"]
    transceiver.setCodecPreferences(h264 + rest)


async def answer(pc: RTCPeerConnection, sdp: str, video, audio, hear: bool) -> RTCSessionDescription:
    """Attach our tracks, prefer H.264 (before setRemoteDescription, where it takes effect), answer.

    `hear`: accept the client's microphone. Otherwise the answer is send-only, so an
    unread incoming track can never queue up inside aiortc.
    """
    video_tx = pc.addTransceiver(video, direction="sendonly")
    _prefer_h264(video_tx)
    if "m=audio" in sdp:
        pc.addTransceiver(audio, direction="sendrecv" if hear else "sendonly")
    try:
        await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
        await pc.setLocalDescription(await pc.createAnswer())
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ApiError(400, "bad_sdp", f"the SDP offer could not be used: {exc}") from None
    return pc.localDescription
