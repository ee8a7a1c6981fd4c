"""Accept-length distributions for EAGLE verify (registry).

An accept length counts the tokens a verify commits per request: the accepted draft tokens
plus the bonus token, so it lies in [1, D] with D = draft tokens (steps + 1 for topk 1).
Each distribution is parameterised by its mean so scenarios state what upstream reports
("mean accept length about 2.8").
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

AcceptSampler = Callable[[random.Random, int], list[int]]
ACCEPT_DISTS: dict[str, Callable[[float, int], AcceptSampler]] = {}


def accept_dist(name: str):
    def wrap(factory: Callable[[float, int], AcceptSampler]):
        ACCEPT_DISTS[name] = factory
        return factory

    return wrap


def _check_mean(mean: float, draft_tokens: int) -> None:
    if not 1.0 <= mean <= draft_tokens:
        raise ValueError(f"accept mean {mean} outside [1, {draft_tokens}]")


@accept_dist("geometric")
def _geometric(mean: float, draft_tokens: int) -> AcceptSampler:
    """Each draft token is accepted with probability p until the first rejection (the usual
    chain model): length = 1 + accepted drafts, capped at D. p is solved from the mean."""
    _check_mean(mean, draft_tokens)
    p = _solve_p(mean, draft_tokens)

    def draw(rng: random.Random, n: int) -> list[int]:
        out = []
        for _ in range(n):
            k = 1
            while k < draft_tokens and rng.random() < p:
                k += 1
            out.append(k)
        return out

    return draw


def _expected_geometric(p: float, d: int) -> float:
    return sum(p**k for k in range(d))


def _solve_p(mean: float, d: int) -> float:
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if _expected_geometric(mid, d) < mean:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@accept_dist("uniform")
def _uniform(mean: float, draft_tokens: int) -> AcceptSampler:
    """Two neighbouring integers mixed to hit the mean (low variance)."""
    _check_mean(mean, draft_tokens)
    base = min(int(mean), draft_tokens - 1) if mean < draft_tokens else draft_tokens
    frac = mean - base

    def draw(rng: random.Random, n: int) -> list[int]:
        return [base + (1 if rng.random() < frac else 0) for _ in range(n)]

    return draw


@dataclass(frozen=True)
class AcceptConfig:
    mean: float = 2.8
    dist: str = "geometric"

    def sampler(self, draft_tokens: int) -> AcceptSampler:
        try:
            factory = ACCEPT_DISTS[self.dist]
        except KeyError:
            raise ValueError(
                f"unknown accept distribution {self.dist!r}; known: {sorted(ACCEPT_DISTS)}"
            ) from None
        return factory(self.mean, draft_tokens)
