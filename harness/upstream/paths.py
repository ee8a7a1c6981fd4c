"""The measured call of each cell path, on either side, and the run of a cell under the ledger.

A path sets up on a side what must come first (a backend, a capture before a replay, a first
verify before a later one, an eager build before the sparse prefill), outside the ledger, and
returns the measured call and what reads its values afterwards. Both sides offer the same
methods (harness.upstream.sides); a path never asks which side it drives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from harness.upstream.cells import BUCKET, SPEC, CellInputs, Outcome
from syncledger import SyncLedger, host_values

Values = Callable[[], dict[str, Any]]
# A path: (side, inputs) -> (the measured call, what reads the values it leaves)
Path = Callable[[Any, CellInputs], tuple[Callable[[], Any], Values]]


def _none() -> dict[str, Any]:
    return {}


def _eager(side: Any, x: CellInputs) -> tuple[Callable[[], Any], Values]:
    be = side.backend(x.pool, SPEC, x.cell.prep)
    b = side.batch(x.batch(x.mirror))
    return lambda: be.init_forward_metadata(b), lambda: side.metadata_values(be)


def _eager_again(side: Any, x: CellInputs) -> tuple[Callable[[], Any], Values]:
    call, values = _eager(side, x)
    call()  # the first call builds what later ones reuse (the verify lengths buffer)
    return call, values


def _capture(side: Any, be: Any, batch: Any) -> None:
    be.init_forward_metadata_out_graph(batch, in_capture=True)
    be.init_forward_metadata_in_graph(batch)


def _graph(side: Any, x: CellInputs, *, replay: bool) -> tuple[Callable[[], Any], Values]:
    be = side.backend(x.pool, SPEC, x.cell.prep)
    side.graph_state(be, BUCKET, SPEC.draft_token_num)
    cap = side.batch(x.graph_batch(True))  # a capture always has the host lengths
    values = lambda: side.metadata_values(be)  # noqa: E731
    if not replay:
        return lambda: _capture(side, be, cap), values
    _capture(side, be, cap)
    b = side.batch(x.graph_batch(x.mirror))

    def replay_call() -> None:
        be.init_forward_metadata_out_graph(b)
        be.init_forward_metadata_in_graph(b)

    return replay_call, values


def _draft(side: Any, x: CellInputs, *, stage: str) -> tuple[Callable[[], Any], Values]:
    ms = side.multistep(x.pool, SPEC)
    b = side.batch(x.batch(x.mirror))
    if stage == "eager":
        return lambda: ms.init_forward_metadata(b), _none
    side.graph_state(ms, BUCKET, 1)
    cap = side.batch(x.batch(True))
    if stage == "capture":
        return lambda: _capture(side, ms, cap), _none
    _capture(side, ms, cap)

    def replay_call() -> None:
        ms.init_forward_metadata_out_graph(b)
        ms.init_forward_metadata_in_graph(b)

    return replay_call, _none


def _sparse_prefill(side: Any, x: CellInputs) -> tuple[Callable[[], Any], Values]:
    """A prefill forward's attention layers at the cell's compress ratios, after the eager
    metadata build: the first builds the forward's chunk cache."""
    be = side.backend(x.pool, SPEC, x.cell.prep)
    b = side.batch(x.batch(x.mirror))
    be.init_forward_metadata(b)
    seen: dict[str, Any] = {}

    def forward() -> None:
        seen["swa_workspace_tokens"] = side.sparse_prefill(be, b, x.cell.ratios)

    return forward, lambda: seen


def _relay(side: Any, x: CellInputs, *, publish: bool) -> tuple[Callable[[], Any], Values]:
    """The spec-v2 relay of a decode batch: the worker publishes the new lengths, the scheduler
    resolves them (and the mirror, when the backends want it)."""
    return side.relay(x, publish=publish)


PATHS: dict[str, Path] = {
    "eager": _eager,
    "eager-again": _eager_again,
    "capture": lambda side, x: _graph(side, x, replay=False),
    "replay": lambda side, x: _graph(side, x, replay=True),
    "draft-eager": lambda side, x: _draft(side, x, stage="eager"),
    "draft-capture": lambda side, x: _draft(side, x, stage="capture"),
    "draft-replay": lambda side, x: _draft(side, x, stage="replay"),
    "sparse-prefill": _sparse_prefill,
    "relay": lambda side, x: _relay(side, x, publish=True),
    "relay-bootstrap": lambda side, x: _relay(side, x, publish=False),
}


def run(side: Any, x: CellInputs) -> Outcome:
    """The cell on one side: set up, then the measured call under a ledger. An exception is the
    cell's outcome unless the side says it shows drift (then it propagates, one line)."""
    out = Outcome()
    with side.prep(x.cell.prep):
        try:
            call, values = PATHS[x.cell.path](side, x)
        except Exception as exc:  # set-up raised: that is the cell's outcome
            side.check_drift(exc)
            out.exception = type(exc).__name__
            return out
        with SyncLedger() as ledger:
            try:
                call()
            except Exception as exc:
                side.check_drift(exc)
                out.exception = type(exc).__name__
    out.syncs = [(e.kind.value, e.location, e.function) for e in ledger.events if e.is_sync]
    if out.exception is None:
        out.values = _on_host(values())
    return out


def _on_host(values: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The values as host tensors (read after the ledger closed: no sync is counted)."""
    out = {}
    for name, v in values.items():
        if isinstance(v, torch.Tensor):
            out[name] = host_values(v).clone()
        elif isinstance(v, int):
            out[name] = torch.tensor([v])
    return out
