"""The HTTP and WebSocket API of docs/api.md, one module per resource."""
