"""How many worker processes a run takes: a fixed number (`--repeats N`), or as many as make
its answer sharp (`--repeats auto --half-width 25us`): processes are added one at a time until
every named Δ's half-width reaches the target, the time budget would run out with one more, or
the most processes were run; the run says which.

At least `min_processes` run first: a t-interval over a handful of processes can be narrow by
chance, and stopping on it would stop early exactly when the spread was underestimated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.results.precision import DeltaName

REACHED, BUDGET, MOST = "reached", "budget", "most"


@dataclass(frozen=True)
class Repeats:
    processes: int = 1  # fixed; with a target, the most
    target_us: float | None = None  # the half-width every named Δ must reach (auto)
    budget_s: float = 600.0  # auto: no process is started that would end past it
    deltas: tuple[DeltaName, ...] = ()  # auto: the Δs to sharpen (empty: every variant's)
    min_processes: int = 5

    @property
    def auto(self) -> bool:
        return self.target_us is not None

    def stop(
        self,
        done: int,
        elapsed_s: float,
        last_s: float,
        half_widths: Callable[[], dict[str, float]],
    ) -> str | None:
        """Why no more processes run after `done` of them (None: run another). `last_s`: the
        last process's wall time, the estimate of the next one's."""
        if done >= self.processes:
            return MOST
        if not self.auto:
            return None
        if done >= self.min_processes:
            widths = half_widths()
            if widths and all(w <= self.target_us for w in widths.values()):
                return REACHED
        if done and elapsed_s + last_s > self.budget_s:
            return BUDGET
        return None

    def record(self, reason: str, widths: dict[str, float], done: int) -> dict[str, Any]:
        """meta.json's `repeats`: what was asked and why the run stopped where it did."""
        return {
            "mode": "auto",
            "target_us": self.target_us,
            "budget_s": self.budget_s,
            "most": self.processes,
            "min_processes": self.min_processes,
            "deltas": [str(d) for d in self.deltas],
            "stopped": reason,
            "processes": done,
            "half_widths_us": {k: round(v, 3) for k, v in widths.items()},
        }

    def argv(self) -> list[str]:
        """The options that ask for this again (reproduce_argv)."""
        if not self.auto:
            return ["--repeats", str(self.processes)] if self.processes > 1 else []
        out = ["--repeats", "auto", "--half-width", f"{self.target_us:g}us"]
        out += ["--budget", f"{self.budget_s:g}s", "--most", str(self.processes)]
        for d in self.deltas:
            out += ["--delta", str(d)]
        return out
