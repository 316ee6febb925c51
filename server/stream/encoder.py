"""H.264 for real time: x264 `ultrafast` + `zerolatency`, at the rate the viewer's link allows.

Stock aiortc encodes with x264's default preset (8 ms per 512x512 frame here, 1 ms
with ultrafast) and recreates the encoder, with a keyframe, on every REMB change
over 10 %. Here the encoder follows the session's BitrateControl (server/stream/link.py),
which changes at most once every MIN_CHANGE_S. A change reopens x264 (PyAV cannot
retune an open encoder: measured, its bit_rate is read once), never a keyframe storm.

How it is hooked in: aiortc has no setting for its encoders, so `install` makes every
sender of this process (the server's, whose only senders are sessions') ask ours
(media/aiortc_hooks.py). Ours implements aiortc's public `Encoder` interface and leaves
packetisation to aiortc's own H264Encoder through its public `pack`.
"""

from __future__ import annotations

import time

import av
from aiortc import RTCRtpCodecParameters
from aiortc.codecs import get_encoder as stock_get_encoder
from aiortc.codecs import h264
from aiortc.codecs.base import Encoder
from av.frame import Frame
from av.packet import Packet

from media import aiortc_hooks
from media.h264 import FrameEncoder
from server.bitrate import BitrateControl
from server.stream.link import OnFrame


class RealtimeH264Encoder(Encoder):
    """x264 with a fast preset at the bitrate of its track's BitrateControl."""

    def __init__(self) -> None:
        self.control: BitrateControl | None = None  # the track's, from its first frame
        self._x264 = FrameEncoder()
        self._packer = h264.H264Encoder()  # aiortc's RTP packetisation (STAP-A, FU-A)

    @property
    def codec(self) -> av.VideoCodecContext | None:
        return self._x264.codec

    @property
    def target_bitrate(self) -> int:
        return self.control.rate if self.control else 0

    @target_bitrate.setter
    def target_bitrate(self, value: int) -> None:  # aiortc sets this on every REMB
        if self.control:  # an estimate before the first frame has nothing to steer yet
            self.control.estimate(int(value), time.monotonic())  # the next frame reopens x264 if it moved

    def encode(self, frame: Frame, force_keyframe: bool = False) -> tuple[list[bytes], int]:
        assert isinstance(frame, av.VideoFrame)
        assert isinstance(frame.opaque, OnFrame), "frames come from AvatarVideoTrack, with its control"
        self.control = frame.opaque.control
        packet = av.Packet(self._x264.encode_frame(frame, self.control.rate, force_keyframe))
        assert frame.time_base is not None  # the track stamps every frame on the 90 kHz clock
        packet.pts, packet.time_base = frame.pts, frame.time_base
        return self._packer.pack(packet)

    def pack(self, packet: Packet) -> tuple[list[bytes], int]:
        """A frame encoded on the engine's node (AVATAR_ENGINE=ray), with its track's control."""
        if isinstance(packet.opaque, OnFrame):
            self.control = packet.opaque.control
        return self._packer.pack(packet)


def _get_encoder(codec: RTCRtpCodecParameters) -> Encoder:
    if codec.mimeType.lower() == "video/h264":
        return RealtimeH264Encoder()
    return stock_get_encoder(codec)


def install() -> None:
    """Make every aiortc sender in this process use the real-time encoder."""
    aiortc_hooks.use_encoders(_get_encoder)
