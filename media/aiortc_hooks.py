"""Every place we reach inside aiortc, in one room, each with the reason aiortc leaves no
public way. aiortc is pinned (pyproject.toml, PINNED here); tests/unit/test_aiortc_hooks.py
fails, naming what moved, when the installed aiortc is another version or lacks any of it.
Each hook returns False (and logs) instead of raising where aiortc differs at run time.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiortc
from aiortc.jitterbuffer import JitterBuffer

logger = logging.getLogger("media.aiortc_hooks")
PINNED = "1.16.0"
JITTER_BUFFER = "_RTCRtpReceiver__jitter_buffer"  # name-mangled: RTCRtpReceiver.__jitter_buffer
ENCODER = "_RTCRtpSender__encoder"  # name-mangled: RTCRtpSender.__encoder


def give_encoder(sender: Any, make: Callable[[Any], Any]) -> bool:
    """This RTCRtpSender's encoder made by `make(codec)` once the codec is negotiated, where
    aiortc would make its own: aiortc has no setting for its encoders (x264's default preset
    and a keyframe on every REMB change: server/stream/encoder.py), and makes them without
    knowing whose track they serve. Wraps `sender._next_encoded_frame(codec)`, which asks
    for the encoder the first time it is None, for its first call only: later frames go
    straight to aiortc's own method."""
    if not hasattr(sender, ENCODER):
        logger.warning("this aiortc keeps its encoders elsewhere: video uses aiortc's own encoder")
        return False

    def wrap(next_frame: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        async def with_ours(codec: Any) -> Any:
            setattr(sender, ENCODER, make(codec))
            del sender._next_encoded_frame  # the class's method again, from the next frame on
            return await next_frame(codec)
        return with_ours

    return _wrap(sender, "_next_encoded_frame", wrap, "video uses aiortc's own encoder")


def wrap_retransmit(sender: Any, wrap: Callable[[Callable[[int], Awaitable[None]]], Callable[[int], Awaitable[None]]]
                    ) -> bool:
    """`sender._retransmit(seq)`, which answers each NACK, replaced by `wrap(original)`:
    aiortc resends every NACKed packet with no limit (server/stream/link.py RetransmitLimit)."""
    return _wrap(sender, "_retransmit", wrap, "NACK resends are not limited")


def wrap_rtcp(sender: Any, wrap: Callable[[Callable[[Any], Awaitable[None]]], Callable[[Any], Awaitable[None]]]
              ) -> bool:
    """`sender._handle_rtcp_packet(packet)` replaced by `wrap(original)`: aiortc acts on PLI
    and FIR only for frames it encodes itself and tells no one else (server/stream/link.py)."""
    return _wrap(sender, "_handle_rtcp_packet", wrap, "keyframe requests reach only aiortc's own encoders")


def replace_jitter_buffer(receiver: Any, buffer: JitterBuffer) -> bool:
    """An RTCRtpReceiver's jitter buffer replaced by `buffer`: aiortc's video buffer waits
    forever for a lost packet, freezing the picture (avatar_client/jitter.py), and its audio
    buffer holds 80 ms back that a server listening to a microphone need not wait
    (media/prompt_audio.py). aiortc takes no buffer of ours."""
    if not isinstance(getattr(receiver, JITTER_BUFFER, None), JitterBuffer):
        logger.warning("this aiortc has no replaceable jitter buffer: lost video packets may freeze the "
                       "picture, and a microphone is heard 80 ms late")
        return False
    setattr(receiver, JITTER_BUFFER, buffer)
    return True


def missing() -> list[str]:
    """What this process's aiortc lacks of what the hooks rely on (empty: all there)."""
    from aiortc import RTCRtpReceiver, RTCRtpSender

    wanted = [(RTCRtpSender, "_next_encoded_frame"), (RTCRtpSender, "_retransmit"),
              (RTCRtpSender, "_handle_rtcp_packet")]
    gaps = [f"{owner.__name__}.{name}" for owner, name in wanted if not hasattr(owner, name)]
    if "self.__encoder: Optional[Encoder] = None" not in inspect.getsource(RTCRtpSender.__init__):
        gaps.append(f"RTCRtpSender.{ENCODER}")
    if "self.__jitter_buffer" not in inspect.getsource(RTCRtpReceiver.__init__):
        gaps.append(f"RTCRtpReceiver.{JITTER_BUFFER}")
    if aiortc.__version__ != PINNED:
        gaps.append(f"aiortc {aiortc.__version__} (pinned {PINNED})")
    return gaps


def _wrap(sender: Any, name: str, wrap: Callable[[Any], Any], loss: str) -> bool:
    original = getattr(sender, name, None)
    if original is None:
        logger.warning("this aiortc has no %s: %s", name, loss)
        return False
    setattr(sender, name, wrap(original))
    return True
