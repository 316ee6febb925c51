"""Samplers. `flow_sigmas` is numpy; the torch FlowMatchScheduler lives in `flow_match`."""

from .sigmas import flow_sigmas

__all__ = ["flow_sigmas"]
