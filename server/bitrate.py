"""BitrateControl: the video's target bitrate for one viewer's link.

BitrateControl moves the bitrate with hysteresis from two signals, as libwebrtc's sender
does: the receiver's delay-based estimate (REMB), and the loss its receiver reports
give. A delay-based estimate alone cannot see a full queue that drops packets (the delay
stops growing), so loss above LOSS_HIGH brings the rate down and loss above LOSS_LOW
forbids probing up.

A receiver's estimate sees only what is sent: Chromium's may not rise past 1.5x the
rate it receives, and near the capacity it last measured it creeps up by a few kbit/s
a second. After a narrow link widens it can sit within the hysteresis band for tens of
seconds (seen in CI: 216 kbit/s for 35 s, where passing runs were past 600 kbit/s
13-15 s after the link widened). libwebrtc's sender probes past its estimate for this;
here an estimate that holds steady for `wait` seconds without loss is probed past by one
STEP_UP. If the link answers that with a lower estimate or with loss, the next such probe
waits twice as long (up to PROBE_AFTER_MAX_S) until the estimate itself passes the
refused rate, so a link that is really full is tried rarely.
"""

from __future__ import annotations

import logging

logger = logging.getLogger("server.stream.link")
MIN_BITRATE = 150_000  # below this a 512x512 face is mush; frames keep flowing regardless
DOWN, UP = 0.8, 1.05  # the estimate must leave this band around the rate to move it
STEP_UP = 1.2  # an estimate above what is sent means no congestion: probe one step higher
LOSS_LOW, LOSS_HIGH = 0.03, 0.06  # fractions lost: above LOW hold, above HIGH come down
MIN_CHANGE_S = 2.0
PROBE_AFTER_S, PROBE_AFTER_MAX_S = 2 * MIN_CHANGE_S, 64.0  # a steady estimate is probed past after this


class BitrateControl:
    """The video's target bitrate for one viewer, with hysteresis (see the module docstring).

    The session's video track owns it; its sender's encoder is made with it
    (server/stream/encoder.py use_realtime_encoder) and tells it each receiver estimate."""

    def __init__(self, ceiling: int):
        self.ceiling, self.rate, self.changed_at = ceiling, ceiling, -MIN_CHANGE_S
        self.lost = 0.0  # the fraction of packets lost lately, by the receiver's reports
        self.wait = PROBE_AFTER_S  # how long a steady estimate holds before it is probed past
        self._past_estimate = False  # the latest change went past the estimate
        self._refused: int | None = None  # a rate probed past the estimate that the link refused

    def estimate(self, bps: int, now: float) -> bool:
        """Take one estimate of what the video may send; True when the target changed.

        REMB estimates only the streams whose packets carry abs-send-time, and aiortc puts it
        on video alone, so the estimate is the video's share already (in libwebrtc's receivers
        as in aiortc's); the delay it measures includes the audio's."""
        if bps < self.rate * DOWN:
            return self._change(int(bps * 0.9), now, "estimate")  # a little under it: drain the queue
        if self.lost > LOSS_LOW:
            return False
        if bps > self.rate * UP:  # one step up, never past the estimate
            if self._refused is None or bps > self._refused:  # the link now carries what it refused
                self.wait, self._refused = PROBE_AFTER_S, None
            return self._change(min(int(self.rate * STEP_UP), bps), now, "probe")
        if now - self.changed_at >= self.wait and self._change(int(self.rate * STEP_UP), now, "steady: probe past it"):
            self._past_estimate = True
            return True
        return False

    def loss(self, fraction: float, now: float) -> bool:
        """Take the fraction of packets the receiver lost lately; True when the target changed."""
        self.lost = fraction
        if fraction > LOSS_HIGH:  # the queue is full: send what got through, and a little less
            return self._change(int(self.rate * (1 - fraction) * 0.9), now, f"{fraction:.0%} lost")
        return False

    def _change(self, rate: int, now: float, why: str) -> bool:
        rate = min(self.ceiling, max(MIN_BITRATE, rate))
        if rate == self.rate or now - self.changed_at < MIN_CHANGE_S:
            return False
        if rate < self.rate and self._past_estimate:  # the link refused the probe: try it less often
            self.wait, self._refused = min(PROBE_AFTER_MAX_S, self.wait * 2), self.rate
        self._past_estimate = False
        logger.info("video bitrate %d -> %d kbit/s (%s)", self.rate // 1000, rate // 1000, why)
        self.rate, self.changed_at = rate, now
        return True
