"""The HTTP and WebSocket API of api.md, one module per resource."""
