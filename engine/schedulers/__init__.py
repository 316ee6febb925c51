"""Samplers: pure tensor math, `set_timesteps` then `step`."""

from .flow_match import FlowMatchScheduler

__all__ = ["FlowMatchScheduler"]
