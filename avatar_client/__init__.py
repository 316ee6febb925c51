"""Python clients of avatar-server (no torch): a WebRTC viewer for tests, benchmarks and agents."""

from .viewer import AvatarViewer

__all__ = ["AvatarViewer"]
