"""The avatar server: HTTP/WebSocket API, WebRTC media, sessions. Never imports torch."""
