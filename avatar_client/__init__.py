"""Python clients of avatar-server (no torch): a WebRTC viewer for tests, benchmarks and agents."""

from .agent import AgentClient, AgentError, AudioStream
from .viewer import AvatarViewer

__all__ = ["AgentClient", "AgentError", "AudioStream", "AvatarViewer"]
