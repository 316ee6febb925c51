"""SDP offer -> answer for a new session: validation, transceivers, codec preference."""

from __future__ import annotations

from aiortc import (
    RTCConfiguration,
    RTCIceServer,
    RTCPeerConnection,
    RTCRtpSender,
    RTCRtpTransceiver,
    RTCSessionDescription,
)
from aiortc.exceptions import InvalidAccessError, InvalidStateError, OperationError
from aiortc.mediastreams import MediaStreamTrack

from server.config import ServerConfig
from server.errors import ApiError
from server.stream.encoder import use_realtime_encoder
from server.stream.link import limit_resends, relay_keyframe_requests
from server.stream.tracks import AvatarVideoTrack

MAX_SDP = 64 * 1024
REQUIRED = (("fingerprint", "WebRTC needs the DTLS certificate fingerprint, or the session could never connect"),
            ("setup", "WebRTC needs the DTLS role (actpass in an offer)"),
            ("ice-ufrag", "WebRTC needs ICE credentials"), ("ice-pwd", "WebRTC needs ICE credentials"))


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
    for line in sdp.splitlines():
        parts = line.strip().split()
        if line.startswith("m=") and (len(parts) < 4 or not parts[1].isdigit()):
            raise ApiError(400, "bad_sdp", f"malformed media line {line.strip()[:80]!r}: "
                           "expected 'm=<media> <port> <proto> <formats>'")
    return sdp


def sends_audio(sdp: str) -> bool:
    """Whether an offer's audio section sends (its direction is sendrecv, sendonly, or unsaid)."""
    for section in sdp.split("\nm=")[1:]:
        if section.startswith("audio"):
            said = {line.strip() for line in section.splitlines()} & {"a=recvonly", "a=inactive"}
            words = section.split()
            if not said and len(words) > 1 and words[1] != "0":  # port 0: a rejected section
                return True
    return False


def peer_connection(config: ServerConfig) -> RTCPeerConnection:
    servers = [RTCIceServer(urls=list(config.ice_servers), username=config.ice_username or None,
                            credential=config.ice_credential or None)] if config.ice_servers else []
    return RTCPeerConnection(RTCConfiguration(iceServers=servers))


def prefer_h264(transceiver: RTCRtpTransceiver) -> None:
    codecs = RTCRtpSender.getCapabilities("video").codecs
    h264 = [c for c in codecs if c.mimeType.lower() == "video/h264"]
    rest = [c for c in codecs if c.mimeType.lower() != "video/h264"]
    transceiver.setCodecPreferences(h264 + rest)


async def answer(pc: RTCPeerConnection, sdp: str, video: AvatarVideoTrack, audio: MediaStreamTrack,
                 hear: bool) -> RTCSessionDescription:
    """Attach our tracks, prefer H.264 (before setRemoteDescription, where it takes effect), answer.

    `hear`: accept the client's microphone. Otherwise the answer is send-only, so an
    unread incoming track can never queue up inside aiortc.
    """
    # Checked here, after mode and avatar: a request wrong in several ways names those first.
    for attribute, why in REQUIRED:
        if f"a={attribute}:" not in sdp:
            raise ApiError(400, "bad_sdp", f"the offer has no 'a={attribute}' line: {why}")
    if hear and not sends_audio(sdp):
        raise ApiError(400, "no_microphone", "this mode listens to the microphone, and the offer sends no audio: "
                       "offer an audio transceiver 'sendrecv' (or 'sendonly'), or use mode 'tts'")
    video_tx = pc.addTransceiver(video, direction="sendonly")
    use_realtime_encoder(video_tx.sender, video.bitrate)
    limit_resends(video_tx.sender, video.bitrate)
    relay_keyframe_requests(video_tx.sender, video.keyframe_wanted)
    prefer_h264(video_tx)
    if "m=audio" in sdp:
        pc.addTransceiver(audio, direction="sendrecv" if hear else "sendonly")
    try:
        await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
        await pc.setLocalDescription(await pc.createAnswer())
    except (InvalidAccessError, InvalidStateError, OperationError) as exc:  # aiortc's own words
        raise ApiError(400, "bad_sdp", f"the SDP offer could not be used: {exc}") from None
    except Exception:  # noqa: BLE001 - anything else a malformed offer trips inside the parser
        raise ApiError(400, "bad_sdp", "the SDP offer could not be parsed; send the offer the browser "
                       "created, unmodified") from None
    return pc.localDescription
