"""Following a viewer's link: the sender's bitrate control and the viewer's jitter buffer,
with real x264 packets (the congestion test runs both over a shaped link)."""

import fractions

import av
import numpy as np
import pytest
from aiortc import RTCPeerConnection, RTCRtpCodecParameters, VideoStreamTrack
from aiortc.codecs.h264 import h264_depayload
from aiortc.codecs.vpx import Vp8Encoder
from aiortc.jitterbuffer import JitterBuffer
from aiortc.rtp import RtpPacket

from avatar_client.jitter import LossTolerantJitterBuffer, is_h264_keyframe
from media import aiortc_hooks
from server.bitrate import MIN_BITRATE, MIN_CHANGE_S, PROBE_AFTER_MAX_S, PROBE_AFTER_S, BitrateControl
from server.stream.encoder import RealtimeH264Encoder, use_realtime_encoder
from server.stream.link import (
    RESEND_BURST,
    RESEND_GAP_S,
    RetransmitLimit,
    limit_resends,
    relay_keyframe_requests,
)


def test_the_bitrate_falls_with_the_estimate_and_with_loss_and_probes_up_only_without_loss():
    control = BitrateControl(1_200_000)
    assert control.estimate(500_000, now=0.0) and control.rate == 450_000
    assert not control.estimate(100_000, now=1.0), "changes are at least MIN_CHANGE_S apart"
    assert control.estimate(2_000_000, now=MIN_CHANGE_S) and control.rate == 540_000  # one probe step
    # A full queue drops packets while the delay-based estimate stays high: loss brings it down.
    assert control.loss(0.2, now=2 * MIN_CHANGE_S) and control.rate == int(540_000 * 0.8 * 0.9)
    held = control.rate
    assert control.loss(0.04, now=3 * MIN_CHANGE_S) is False
    assert not control.estimate(2_000_000, now=4 * MIN_CHANGE_S) and control.rate == held, "no probe while lossy"
    control.loss(0.0, now=5 * MIN_CHANGE_S)
    assert control.estimate(2_000_000, now=5 * MIN_CHANGE_S) and control.rate > held
    control.loss(0.99, now=7 * MIN_CHANGE_S)
    assert control.rate == MIN_BITRATE


def test_a_steady_estimate_is_probed_past_and_less_often_when_the_link_refuses():
    control = BitrateControl(1_200_000)
    control.estimate(240_000, now=0.0)  # a narrow link: 216 kbit/s
    steady = control.rate
    assert not control.estimate(int(steady * 1.04), now=PROBE_AFTER_S - 0.1), "inside the band, not yet"
    control.lost = 0.04
    assert not control.estimate(steady, now=PROBE_AFTER_S), "never while lossy"
    control.lost = 0.0
    assert control.estimate(steady, now=PROBE_AFTER_S) and control.rate == int(steady * 1.2)
    # The link answers with a lower estimate: down, and the next such probe waits twice as long
    t = PROBE_AFTER_S + MIN_CHANGE_S
    assert control.estimate(int(steady * 0.9), now=t) and control.wait == 2 * PROBE_AFTER_S
    refused = int(steady * 1.2)
    # The estimate recovering to where it was is no news: the wait stays long
    assert control.estimate(steady, now=t + MIN_CHANGE_S) and control.wait == 2 * PROBE_AFTER_S
    t, settled = t + MIN_CHANGE_S, control.rate
    assert not control.estimate(settled, now=t + PROBE_AFTER_S)
    assert control.estimate(settled, now=t + 2 * PROBE_AFTER_S) and control.rate > settled
    # ...but an estimate past the refused rate makes probing past it quick again
    assert control.estimate(refused * 2, now=t + 2 * PROBE_AFTER_S + MIN_CHANGE_S)
    assert control.wait == PROBE_AFTER_S
    for i in range(10):  # a full link refuses every probe: the wait is bounded
        control.rate, control._past_estimate = 1_000_000, True
        assert control.loss(0.5, now=100.0 + i * MIN_CHANGE_S)
    assert control.wait == PROBE_AFTER_MAX_S


def test_the_ceiling_is_never_probed_past():
    control = BitrateControl(1_200_000)
    assert not control.estimate(1_200_000, now=100.0) and control.rate == 1_200_000


def test_the_encoder_follows_the_tracks_control_and_reopens_only_when_it_moves():
    control = BitrateControl(1_200_000)
    encoder, opened = RealtimeH264Encoder(control), []
    for i, frame in enumerate(_frames(30)):
        if i == 10:
            assert control.estimate(597_000, now=0.0) and control.rate == 537_300  # x264 reads back 537_000
        encoder.encode(frame)
        if not opened or opened[-1] is not encoder.codec:
            opened.append(encoder.codec)
    assert [codec.bit_rate for codec in opened] == [1_200_000, 537_000], "one reopen, for the one change"


@pytest.mark.parametrize(("mime", "made"), [("video/H264", RealtimeH264Encoder), ("video/VP8", Vp8Encoder)])
async def test_a_session_sender_encodes_h264_with_ours_following_its_tracks_control(mime, made):
    """aiortc makes a sender's encoder on its first frame, knowing only the codec: the sender
    gets ours, made with the track's control; another codec keeps aiortc's own."""
    pc, control = RTCPeerConnection(), BitrateControl(1_200_000)
    try:
        sender = pc.addTransceiver(VideoStreamTrack(), direction="sendonly").sender
        assert use_realtime_encoder(sender, control)
        codec = RTCRtpCodecParameters(mimeType=mime, clockRate=90_000, payloadType=96)
        assert await sender._next_encoded_frame(codec) is not None
        encoder = getattr(sender, aiortc_hooks.ENCODER)
        assert type(encoder) is made
        assert await sender._next_encoded_frame(codec) is not None  # later frames: aiortc's own path
        assert getattr(sender, aiortc_hooks.ENCODER) is encoder, "made once, kept"
        if made is RealtimeH264Encoder:
            assert encoder.control is control
            encoder.target_bitrate = 500_000  # a receiver's estimate, as aiortc hands it on
            assert control.rate == 450_000
    finally:
        await pc.close()


def _frames(count: int):
    """A moving gradient, as cheap to encode as a face."""
    y, x = np.mgrid[:256, :256]
    for i in range(count):
        rgb = np.stack([(x + 3 * i) % 256, (y + 2 * i) % 256, (x + y) // 2 % 256], axis=-1).astype(np.uint8)
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        frame.pts, frame.time_base = i * 3600, fractions.Fraction(1, 90_000)
        yield frame


def _stream(buffer, frames: int, lost: int):
    """Packets of an x264 stream through `buffer`, one packet (of frame `lost`) never arriving;
    a PLI makes the next frame a keyframe. Returns (frame index, keyframe?) of each frame out, PLI count."""
    encoder, seq, pli_pending, out, plis = RealtimeH264Encoder(BitrateControl(1_200_000)), 0, False, [], 0
    for i, frame in enumerate(_frames(frames)):
        payloads, timestamp = encoder.encode(frame, force_keyframe=pli_pending)
        pli_pending = False
        for n, payload in enumerate(payloads):
            seq += 1
            if i == lost and n == 0:
                continue
            packet = RtpPacket(payload_type=96, sequence_number=seq, timestamp=timestamp)
            packet._data = h264_depayload(payload)
            pli, got = buffer.add(packet)
            plis += pli
            pli_pending |= pli
            if got is not None:
                out.append((got.timestamp // 3600, is_h264_keyframe(got.data)))
    return out, plis


def test_aiortcs_own_buffer_freezes_on_a_packet_that_never_comes():
    out, plis = _stream(JitterBuffer(capacity=512, is_video=True), frames=60, lost=10)
    assert max(i for i, _ in out) < 10 and plis == 0  # why the viewer brings its own


def test_a_lost_packet_is_given_up_and_the_picture_resumes_at_the_next_keyframe():
    buffer = LossTolerantJitterBuffer()
    out, plis = _stream(buffer, frames=60, lost=10)
    resumed = [i for i, _ in out if i > 10]
    assert buffer.gave_up == 1 and plis == 1
    assert out[len(out) - len(resumed)][1], "the first frame after the loss is a keyframe"
    assert resumed[0] <= 10 + 1 + 0.3 * 25 + 2, f"resumed at frame {resumed[0]}, given up after 0.3 s"
    assert resumed == list(range(resumed[0], 59)), "then every frame (the last waits for a successor)"


def test_resends_are_limited_per_packet_and_in_total():
    control = BitrateControl(1_200_000)
    control.rate = 150_000  # 0.2 of it is ~3 packets a second
    limit = RetransmitLimit(control)
    t = limit._bucket.at
    assert limit.allow(7, now=t) and not limit.allow(7, now=t + 0.1), "once per round trip"
    assert limit.allow(7, now=t + RESEND_GAP_S)
    allowed = sum(limit.allow(seq, now=t + seq / 1000) for seq in range(100, 200))  # a NACK storm of 0.1 s
    assert allowed <= RESEND_BURST and limit.refused >= 90
    later = sum(limit.allow(seq, now=t + 10 + seq / 100) for seq in range(300, 400))  # 100 NACKs over 1 s
    assert later <= RESEND_BURST + control.rate * 0.2 / 9600 * 1.1  # a full bucket, then its refill


async def test_only_the_limited_senders_resends_are_filtered():
    from aiortc import RTCPeerConnection

    pc = RTCPeerConnection()
    try:
        video, audio = pc.addTransceiver("video").sender, pc.addTransceiver("audio").sender
        limit = limit_resends(video, BitrateControl(1_200_000))
        assert limit is not None and video._retransmit is not audio._retransmit
        assert "_retransmit" not in vars(audio), "the class and the other senders are untouched"
        await video._retransmit(1)  # nothing in the history: a no-op through the limit
        assert limit._resent == {1: limit._resent[1]}
    finally:
        await pc.close()


async def test_keyframe_requests_reach_an_engine_that_encodes_and_aiortc_still_handles_them():
    from aiortc import RTCPeerConnection
    from aiortc.rtp import RTCP_PSFB_PLI, RTCP_RTPFB_NACK, RtcpPsfbPacket, RtcpRtpfbPacket

    pc = RTCPeerConnection()
    try:
        sender = pc.addTransceiver("video").sender
        wanted: list[int] = []
        relay_keyframe_requests(sender, lambda: wanted.append(1))
        await sender._handle_rtcp_packet(RtcpRtpfbPacket(fmt=RTCP_RTPFB_NACK, ssrc=1, media_ssrc=2, lost=[]))
        assert wanted == [], "only PLI and FIR ask for a keyframe"
        await sender._handle_rtcp_packet(RtcpPsfbPacket(fmt=RTCP_PSFB_PLI, ssrc=1, media_ssrc=sender._ssrc))
        assert wanted == [1]
        assert sender._RTCRtpSender__force_keyframe, "aiortc's own encoder is still asked for one too"
    finally:
        await pc.close()
