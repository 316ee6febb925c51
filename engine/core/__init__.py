"""The engine's abstractions: Module (one model), Stage (a typed step), Pipeline (the one
orchestrator of a session's chunk loop), RollingState (what survives between chunks), the
N/I chunk plan, and the motion-coefficient space every family shares."""
