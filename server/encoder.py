"""H.264 for real time: x264 `ultrafast` + `zerolatency`, following the viewer's link.

Stock aiortc encodes with x264's default preset (8 ms per 512x512 frame here, 1 ms
with ultrafast) and recreates the encoder, with a keyframe, on every REMB change
over 10 %. Here the receiver's estimate (REMB) moves the bitrate with hysteresis
(BitrateControl): down at once when the link is clearly narrower, up one probe step
(x1.2) when the estimate is above what is sent. A change reopens
x264 (PyAV cannot retune an open encoder: measured, its bit_rate is read once), so
changes are rare: at most one every MIN_CHANGE_S, never a keyframe storm.
"""

from __future__ import annotations

import fractions
import time
from typing import Iterator

import av
from aiortc import rtcrtpsender
from aiortc.codecs import get_encoder as stock_get_encoder
from aiortc.codecs import h264

FPS = 25
MIN_BITRATE = 150_000  # below this a 512x512 face is mush; frames keep flowing regardless
AUDIO_BPS = 96_000 + 50 * 60 * 8  # aiortc's Opus, plus 50 packets/s of RTP/UDP/IP headers
DOWN, UP = 0.8, 1.05  # the video's share of the estimate must leave this band to move it
STEP_UP = 1.2  # an estimate above what is sent means no congestion: probe one step higher
MIN_CHANGE_S = 2.0


class BitrateControl:
    """The target bitrate from REMB estimates, with hysteresis (see the module docstring)."""

    def __init__(self, ceiling: int):
        self.ceiling, self.rate, self.changed_at = ceiling, ceiling, -MIN_CHANGE_S

    def estimate(self, bps: int, now: float) -> bool:
        """Take one estimate of the whole link (REMB covers audio too); True when the target changed."""
        if now - self.changed_at < MIN_CHANGE_S:
            return False
        bps -= AUDIO_BPS
        if bps < self.rate * DOWN:
            new = max(MIN_BITRATE, int(bps * 0.9))  # a little under the estimate: drain the queue
        elif bps > self.rate * UP and self.rate < self.ceiling:
            new = min(self.ceiling, int(self.rate * STEP_UP))
        else:
            return False
        self.rate, self.changed_at = new, now
        return True


class RealtimeH264Encoder(h264.H264Encoder):
    """aiortc's H264 encoder with a fast preset and a bitrate that follows REMB calmly."""

    bitrate = 1_200_000  # the ceiling: the configured video_bitrate

    def __init__(self) -> None:
        super().__init__()
        self.codec = None
        self.control = BitrateControl(self.bitrate)
        self._reopen = False  # set on the event loop; the encoding thread acts on it

    @property
    def target_bitrate(self) -> int:
        return self.control.rate

    @target_bitrate.setter
    def target_bitrate(self, value: int) -> None:  # aiortc calls this on every REMB
        if self.control.estimate(int(value), time.monotonic()):
            self._reopen = True  # reopened at the new rate with the next frame

    def _encode_frame(self, frame: av.VideoFrame, force_keyframe: bool) -> Iterator[bytes]:
        if self._reopen or (self.codec and (frame.width != self.codec.width or frame.height != self.codec.height)):
            self.codec, self._reopen = None, False
        frame.pict_type = av.video.frame.PictureType.I if force_keyframe else av.video.frame.PictureType.NONE
        if self.codec is None:
            self.codec = self._open(frame.width, frame.height)
        data = b"".join(bytes(p) for p in self.codec.encode(frame))
        if data:
            yield from self._split_bitstream(data)

    def _open(self, width: int, height: int) -> av.VideoCodecContext:
        codec = av.CodecContext.create("libx264", "w")
        codec.width, codec.height = width, height
        rate = codec.bit_rate = self.control.rate
        codec.pix_fmt = "yuv420p"
        codec.framerate = fractions.Fraction(FPS, 1)
        codec.time_base = fractions.Fraction(1, FPS)
        # The VBV caps every frame, keyframes too, at half a second of the link's bits: a
        # keyframe larger than a narrow link's queue would be lost again and again.
        codec.options = {"preset": "ultrafast", "tune": "zerolatency", "level": "31", "g": str(2 * FPS),
                         "maxrate": str(rate), "bufsize": str(rate // 2)}
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
