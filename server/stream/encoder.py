"""H.264 for real time: x264 `ultrafast` + `zerolatency`, at the rate the viewer's link allows.

Stock aiortc encodes with x264's default preset (8 ms per 512x512 frame here, 1 ms
with ultrafast) and recreates the encoder, with a keyframe, on every REMB change
over 10 %. Here the encoder follows its track's BitrateControl (server/bitrate.py),
which changes at most once every MIN_CHANGE_S. A change reopens x264 (PyAV cannot
retune an open encoder: measured, its bit_rate is read once), never a keyframe storm.

How it is hooked in: aiortc has no setting for its encoders, so `use_realtime_encoder`
hands one session sender ours, made with that track's control, once H.264 is negotiated
(media/aiortc_hooks.py). Ours implements aiortc's public `Encoder` interface and leaves
packetisation to aiortc's own H264Encoder through its public `pack`; the units of an
engine that compresses on its own node (AVATAR_ENGINE=ray) are only packed, and the
receiver's estimates still reach the control, which that engine follows.
"""

from __future__ import annotations

import time
from typing import Any

import av
from aiortc import RTCRtpCodecParameters
from aiortc.codecs import get_encoder, h264
from aiortc.codecs.base import Encoder
from av.frame import Frame
from av.packet import Packet

from media import aiortc_hooks
from media.h264 import FrameEncoder
from server.bitrate import BitrateControl


class RealtimeH264Encoder(Encoder):
    """x264 with a fast preset at the bitrate of its track's BitrateControl."""

    def __init__(self, control: BitrateControl) -> None:
        self.control = control
        self._x264 = FrameEncoder()
        self._packer = h264.H264Encoder()  # aiortc's RTP packetisation (STAP-A, FU-A)

    @property
    def codec(self) -> av.VideoCodecContext | None:
        return self._x264.codec

    @property
    def target_bitrate(self) -> int:
        return self.control.rate

    @target_bitrate.setter
    def target_bitrate(self, value: int) -> None:  # aiortc sets this on every REMB
        self.control.estimate(int(value), time.monotonic())  # the next frame reopens x264 if it moved

    def encode(self, frame: Frame, force_keyframe: bool = False) -> tuple[list[bytes], int]:
        assert isinstance(frame, av.VideoFrame)
        packet = av.Packet(self._x264.encode_frame(frame, self.control.rate, force_keyframe))
        assert frame.time_base is not None  # the track stamps every frame on the 90 kHz clock
        packet.pts, packet.time_base = frame.pts, frame.time_base
        return self._packer.pack(packet)

    def pack(self, packet: Packet) -> tuple[list[bytes], int]:
        return self._packer.pack(packet)


def use_realtime_encoder(sender: Any, control: BitrateControl) -> bool:
    """`sender` (a session's video) encodes with RealtimeH264Encoder following `control`
    where H.264 is negotiated, with aiortc's own encoder for any other codec."""

    def make(codec: RTCRtpCodecParameters) -> Encoder:
        if codec.mimeType.lower() == "video/h264":
            return RealtimeH264Encoder(control)
        return get_encoder(codec)

    return aiortc_hooks.give_encoder(sender, make)
