"""Torch-only weight placement for models on GPUs (offload, sharding); not loaded on CPU paths."""
