"""Training code for the models the engine ships (not imported by the server or the engine)."""
