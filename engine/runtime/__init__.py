"""Engine processes: the worker that runs Pipelines for its sessions, its IPC messages and
frame ring, and entry points importable without model code."""
