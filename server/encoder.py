"""H.264 for real time: x264 `ultrafast` + `zerolatency` at a steady bitrate.

Stock aiortc encodes with x264's default preset (8 ms per 512x512 frame here, 1 ms
with ultrafast) and recreates the encoder, with a keyframe, on every REMB change
over 10 %. This encoder keeps one bitrate for the life of the stream.
"""

from __future__ import annotations

import fractions
from typing import Iterator

import av
from aiortc import rtcrtpsender
from aiortc.codecs import h264
from aiortc.codecs import get_encoder as stock_get_encoder

FPS = 25


class RealtimeH264Encoder(h264.H264Encoder):
    """aiortc's H264 encoder with a fast preset and no bitrate-driven restarts."""

    bitrate = 1_200_000

    def __init__(self) -> None:
        super().__init__()
        self.codec = None

    @property
    def target_bitrate(self) -> int:
        return self.bitrate

    @target_bitrate.setter
    def target_bitrate(self, value: int) -> None:
        pass  # hold steady: a new bitrate means a new encoder and a keyframe

    def _encode_frame(self, frame: av.VideoFrame, force_keyframe: bool) -> Iterator[bytes]:
        if self.codec and (frame.width != self.codec.width or frame.height != self.codec.height):
            self.codec = None
        frame.pict_type = av.video.frame.PictureType.I if force_keyframe else av.video.frame.PictureType.NONE
        if self.codec is None:
            self.codec = self._open(frame.width, frame.height)
        data = b"".join(bytes(p) for p in self.codec.encode(frame))
        if data:
            yield from self._split_bitstream(data)

    def _open(self, width: int, height: int) -> av.VideoCodecContext:
        codec = av.CodecContext.create("libx264", "w")
        codec.width, codec.height = width, height
        codec.bit_rate = self.bitrate
        codec.pix_fmt = "yuv420p"
        codec.framerate = fractions.Fraction(FPS, 1)
        codec.time_base = fractions.Fraction(1, FPS)
        codec.options = {"preset": "ultrafast", "tune": "zerolatency", "level": "31", "g": str(2 * FPS)}
        codec.profile = "Baseline"
        return codec


def _get_encoder(codec):
    if codec.mimeType.lower() == "video/h264":
        return RealtimeH264Encoder()
    return stock_get_encoder(codec)


def install(bitrate: int) -> None:
    """Make every aiortc sender in this process use the real-time encoder."""
    RealtimeH264Encoder.bitrate = bitrate
    rtcrtpsender.get_encoder = _get_encoder
