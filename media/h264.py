"""Our H.264: one set of x264 settings and one encoder that reopens when the rate moves, for
the server's real-time senders (server/stream/encoder.py), its shared viewers' encoder, and a Ray
actor's (one per session, on the node that renders it, so only packets cross the network).
This module imports no aiortc."""

from __future__ import annotations

import fractions

import av
import numpy as np

from .clock import FPS, SAMPLE_RATE
from .frame_size import FrameSize, frame_dims


def open_h264(width: int, height: int, rate: int) -> av.VideoCodecContext:
    """x264 `ultrafast` + `zerolatency` at `rate` bit/s (PyAV cannot retune an open encoder)."""
    codec = av.CodecContext.create("libx264", "w")
    codec.width, codec.height = width, height
    codec.bit_rate = rate
    codec.pix_fmt = "yuv420p"
    codec.framerate = fractions.Fraction(FPS, 1)
    codec.time_base = fractions.Fraction(1, FPS)
    # The VBV caps every frame, keyframes too, at half a second of the link's bits: a
    # keyframe larger than a narrow link's queue would be lost again and again.
    # One thread: every session has its own encoder and the sessions fill the cores already;
    # x264's slice threads only add their synchronisation (a 512x512 frame here: 0.84 ms of
    # CPU against 1.03, in the same wall time).
    codec.options = {"preset": "ultrafast", "tune": "zerolatency", "level": "31", "g": str(2 * FPS),
                     "maxrate": str(rate), "bufsize": str(rate // 2), "threads": "1"}
    codec.profile = "Baseline"
    return codec


class FrameEncoder:
    """Frames, in order, to H.264 access units (Annex B bytes, one per frame) at a rate that
    may change between frames: a change of rate or size reopens x264, with a keyframe."""

    def __init__(self) -> None:
        self.codec: av.VideoCodecContext | None = None
        self.rate = 0  # the rate asked for (x264's bit_rate reads back rounded to kbit/s)
        self._pts = 0

    def encode(self, i420: np.ndarray, rate: int, keyframe: bool = False) -> bytes:
        """A raw I420 frame, stamped with the next frame number."""
        frame = av.VideoFrame.from_ndarray(i420, format="yuv420p")
        frame.pts, self._pts = self._pts, self._pts + 1
        return self.encode_frame(frame, rate, keyframe)

    def encode_frame(self, frame: av.VideoFrame, rate: int, keyframe: bool = False) -> bytes:
        if self.codec is None or rate != self.rate or (frame.width, frame.height) != (self.codec.width,
                                                                                     self.codec.height):
            self.codec, self.rate = open_h264(frame.width, frame.height, rate), rate
        frame.pict_type = av.video.frame.PictureType.I if keyframe else av.video.frame.PictureType.NONE
        return b"".join(bytes(p) for p in self.codec.encode(frame))


LIVE_BITRATE = 1_500_000


def add_live_streams(container: av.container.OutputContainer, size: FrameSize) -> tuple[av.VideoStream, av.AudioStream]:
    """H.264 and AAC as a live ingest (RTMP) wants them: a keyframe every 2 s exactly (no
    scene-cut ones), constant 25 fps, no B-frames; the muxer puts the codec parameters in
    the stream header. Used by a session's broadcast and by `avatar-render --out rtmp://`."""
    video = container.add_stream("libx264", rate=FPS)
    video.width, video.height = frame_dims(size)
    video.pix_fmt, video.bit_rate = "yuv420p", LIVE_BITRATE
    video.options = {"preset": "veryfast", "tune": "zerolatency", "g": str(2 * FPS), "keyint_min": str(2 * FPS),
                     "sc_threshold": "0", "bf": "0"}
    audio = container.add_stream("aac", rate=SAMPLE_RATE, layout="mono")
    audio.bit_rate = 96_000
    return video, audio
