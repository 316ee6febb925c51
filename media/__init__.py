"""Media both sides share: the clock (25 fps video, 48 kHz sound), our H.264, and every hook
into aiortc's internals. Imports nothing of the server, the engine or torch; only
`aiortc_hooks` imports aiortc."""
