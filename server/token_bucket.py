"""A token bucket whose rate the caller gives at each refill (a link's rate moves)."""

from __future__ import annotations


class TokenBucket:
    """Up to `burst` tokens; `fill` adds what the time since the last fill earned at `per_s`."""

    def __init__(self, burst: float, now: float):
        self.burst, self.tokens, self.at = burst, float(burst), now

    def fill(self, now: float, per_s: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.at) * per_s)
        self.at = now

    def take(self) -> bool:
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True
