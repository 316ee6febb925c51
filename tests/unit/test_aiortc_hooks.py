"""Every hook into aiortc's internals is in media/aiortc_hooks.py, and what they rely on is there."""

from pathlib import Path

import aiortc
import pytest
from aiortc import RTCPeerConnection

from avatar_client.jitter import LossTolerantJitterBuffer, tolerate_loss
from media import aiortc_hooks
from media.prompt_audio import PromptAudioBuffer, listen_promptly

ROOT = Path(__file__).resolve().parents[2]
PRIVATE = ("._retransmit", "._handle_rtcp_packet", "__jitter_buffer", "rtcrtpsender", "get_encoder =",
           "_next_encoded_frame", "__encoder")


def test_the_pinned_aiortc_has_everything_the_hooks_rely_on():
    """Fails, naming each gap, when aiortc is upgraded: re-read each hook's reason first."""
    assert aiortc_hooks.missing() == [], f"aiortc {aiortc.__version__} moved what media/aiortc_hooks.py uses"


def test_the_check_names_a_missing_hook(monkeypatch):
    monkeypatch.delattr(aiortc.RTCRtpSender, "_retransmit")
    monkeypatch.setattr(aiortc, "__version__", "9.9.9")
    assert aiortc_hooks.missing() == ["RTCRtpSender._retransmit", f"aiortc 9.9.9 (pinned {aiortc_hooks.PINNED})"]


@pytest.mark.parametrize("package", ["server", "avatar_client", "engine", "speech", "testkit"])
def test_no_other_module_reaches_into_aiortc(package):
    reaching = [str(p.relative_to(ROOT)) for p in (ROOT / package).rglob("*.py")
                if any(name in p.read_text() for name in PRIVATE)]
    assert reaching == []


@pytest.mark.parametrize(("kind", "give", "buffer"), [("video", tolerate_loss, LossTolerantJitterBuffer),
                                                     ("audio", listen_promptly, PromptAudioBuffer)])
async def test_a_real_receiver_takes_our_buffer(kind, give, buffer):
    pc = RTCPeerConnection()
    try:
        receiver = pc.addTransceiver(kind, direction="recvonly").receiver
        assert give(receiver)
        assert isinstance(getattr(receiver, aiortc_hooks.JITTER_BUFFER), buffer)
    finally:
        await pc.close()
