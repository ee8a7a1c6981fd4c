"""The scenario schema: dataclasses whose field metadata says what a valid value is.

One generic validator (`from_mapping`) walks these dataclasses, so a new key is one field with
its constraints, never new parsing code. Errors are `InputError`s naming the file and the dotted
key (exit 2, one line, nothing written).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Union

from harness.errors import InputError, shown

MODELS = ("flash", "pro")
SERVING_MODES = ("nonspec", "eagle", "specv2", "direct")
MIRRORS = ("auto", "present", "absent")
KERNEL_IMPLS = ("torch", "triton")
DEFAULT_VARIANTS = ("before", "after", "dropped")


def known_variants() -> tuple[str, ...]:
    """Variant names from the backend's registry (the fixed three until it is importable)."""
    try:
        from harness.backend import variant_names

        return tuple(variant_names())
    except Exception:  # the backend may be absent or broken; the names are part of the contract
        return DEFAULT_VARIANTS


def _spec(
    doc: str,
    *,
    choices: tuple[str, ...] | None = None,
    choices_fn: Any = None,
    min: float | None = None,
    max: float | None = None,
    nonempty: bool = False,
) -> dict[str, Any]:
    return {
        "doc": doc,
        "choices": choices,
        "choices_fn": choices_fn,
        "min": min,
        "max": max,
        "nonempty": nonempty,
    }


@dataclass
class SpecConfig:
    """EAGLE settings (serving modes eagle and specv2)."""

    steps: int = field(default=3, metadata=_spec("draft steps per verify", min=1, max=16))
    topk: int = field(default=1, metadata=_spec("draft top-k (only 1 is modelled)", min=1, max=1))
    draft_tokens: int = field(default=4, metadata=_spec("tokens per verify", min=2, max=32))
    accept_mean: float = field(
        default=2.8, metadata=_spec("mean accept length (tokens per verify)", min=1.0, max=32.0)
    )


@dataclass
class StepsConfig:
    """How many scheduler steps each cell runs after warm-up and capture."""

    warmup: int = field(default=2, metadata=_spec("unmeasured steps first", min=0, max=10_000))
    count: int = field(default=16, metadata=_spec("measured steps, count pass", min=1, max=100_000))
    time: int = field(default=200, metadata=_spec("measured steps, time pass", min=1, max=100_000))
    # host times on the CPU say little, and 200 steps of every cell take minutes there
    time_emu: int = field(
        default=20,
        metadata=_spec("measured steps, time pass on the emulated device", min=1, max=100_000),
    )

    # the time pass interleaves cells: rounds of this many steps per cell, in shuffled order
    round_steps: int = field(
        default=5,
        metadata=_spec("measured steps per cell in each round of the time pass", min=1, max=10_000),
    )

    def time_steps(self, device_kind: str) -> int:
        return self.time if device_kind == "cuda" else self.time_emu


def known_injections() -> tuple[str, ...]:
    """Sync kinds the sync-cost experiment can inject (its registry; no torch needed)."""
    from harness.synccost.cases import INJECTIONS

    return tuple(INJECTIONS)


@dataclass
class SyncCostConfig:
    """The sync-cost experiment: the same step with k injected syncs of each kind, at each
    stand-in forward duration; cells are their product (k = 0 once per duration)."""

    kinds: list[str] = field(
        default_factory=lambda: list(known_injections()),
        metadata=_spec("sync kinds to inject", choices_fn=known_injections, nonempty=True),
    )
    k: list[int] = field(
        default_factory=lambda: [0, 1, 2, 4],
        metadata=_spec("injected syncs per step (a sweep)", min=0, max=64, nonempty=True),
    )
    forward_us: list[float] = field(
        default_factory=lambda: [200.0, 1000.0, 4000.0],
        metadata=_spec("stand-in forward durations, µs (a sweep)", min=0, max=1e6, nonempty=True),
    )


def exchange_backends() -> tuple[str, ...]:
    """The DP exchange backends harness.dp registers (imported late, as the variants are)."""
    from harness.dp.exchange import EXCHANGE_BACKENDS

    return tuple(EXCHANGE_BACKENDS)


def inject_regions() -> tuple[str, ...]:
    from harness.dp.inject import INJECT_REGIONS

    return INJECT_REGIONS


@dataclass
class RankStream:
    """One rank's requests and code under DP attention; keys left out take the scenario's."""

    batch_size: int | None = field(
        default=None, metadata=_spec("requests the rank decodes", min=1, max=4096)
    )
    prefill_every: int | None = field(
        default=None,
        metadata=_spec(
            "a prefill step every N steps on this rank (0: never)", min=0, max=1_000_000
        ),
    )
    idle: bool = field(default=False, metadata=_spec("no requests: the rank runs IDLE batches"))
    variant: str | None = field(
        default=None, metadata=_spec("backend variant of this rank", choices_fn=known_variants)
    )
    mirror: str | None = field(
        default=None, metadata=_spec("host mirror setting of this rank", choices=MIRRORS)
    )


@dataclass
class InjectConfig:
    """A sync planted on one rank; the DP cells run without it and with it."""

    rank: int = field(default=0, metadata=_spec("the rank that makes it", min=0, max=1023))
    kind: str = field(
        default="item", metadata=_spec("the sync (as sync_cost's)", choices_fn=known_injections)
    )
    region: str = field(
        default="step/scheduler/prepare",
        metadata=_spec("where in the rank's step", choices_fn=inject_regions),
    )
    count: int = field(default=1, metadata=_spec("syncs per step", min=1, max=1000))


@dataclass
class DPConfig:
    """DP attention: ranks are torch.distributed processes that exchange a record every step."""

    ranks: int = field(default=2, metadata=_spec("data-parallel attention ranks", min=2, max=1024))
    backend: list[str] = field(
        default_factory=lambda: ["gloo"],
        metadata=_spec(
            "the exchange (a sweep): gloo (host tensors, overlap scheduler on) or nccl (device "
            "tensors, overlap scheduler off)",
            choices_fn=exchange_backends,
            nonempty=True,
        ),
    )
    forward_us: list[float] | None = field(
        default=None,
        metadata=_spec(
            "stand-in forward durations, µs (a sweep: host-bound and GPU-bound); null: the "
            "scenario's forward_us",
            min=0,
            max=1e7,
            nonempty=True,
        ),
    )
    streams: list[RankStream] = field(
        default_factory=list,
        metadata=_spec("per-rank streams, rank 0 first; ranks past the list take the scenario's"),
    )
    inject: InjectConfig | None = field(
        default=None, metadata=_spec("a sync planted on one rank (cells without and with it)")
    )
    timeout_s: float = field(
        default=60.0,
        metadata=_spec(
            "timeout of every collective, s: a dead or stuck rank ends the run", min=1, max=3600
        ),
    )


@dataclass
class Scenario:
    """One scenario file. Lists (batch_sizes, variants, mirror) are sweeps: cells are their product."""

    name: str = field(default="", metadata=_spec("scenario name (default: the file's stem)"))
    description: str = field(default="", metadata=_spec("one line for humans"))
    model: str = field(default="flash", metadata=_spec("model shape", choices=MODELS))
    seed: int = field(default=0, metadata=_spec("seed of the scheduler", min=0, max=2**31 - 1))
    serving_mode: str = field(
        default="nonspec", metadata=_spec("how the mirror is produced", choices=SERVING_MODES)
    )
    batch_sizes: list[int] = field(
        default_factory=lambda: [8],
        metadata=_spec("batch sizes (a sweep)", min=1, max=4096, nonempty=True),
    )
    context_len: int = field(
        default=4096, metadata=_spec("tokens per request at most", min=256, max=1_048_576)
    )
    prefill_every: int = field(
        default=0, metadata=_spec("a prefill step every N steps (0: never)", min=0, max=1_000_000)
    )
    variants: list[str] = field(
        default_factory=lambda: list(DEFAULT_VARIANTS),
        metadata=_spec("backend variants to run", choices_fn=known_variants, nonempty=True),
    )
    mirror: list[str] = field(
        default_factory=lambda: ["auto"],
        metadata=_spec(
            "host mirror: auto (what upstream serving does), or forced present/absent where "
            "the serving mode has that switch (specv2: the relay; direct)",
            choices=MIRRORS,
            nonempty=True,
        ),
    )
    cuda_graph: bool = field(default=True, metadata=_spec("replay CUDA graphs when a bucket fits"))
    cuda_graph_max_bs: int | None = field(
        default=None,
        metadata=_spec(
            "largest captured bucket (null: the bucket of each batch size)", min=1, max=4096
        ),
    )
    prep_in_graph: bool = field(default=True, metadata=_spec("raw metadata on host, rest in graph"))
    forward_us: float = field(
        default=2000.0, metadata=_spec("stand-in forward duration, µs (GPU only)", min=0, max=1e7)
    )
    kernels: str = field(default="torch", metadata=_spec("metadata kernels", choices=KERNEL_IMPLS))
    spec: SpecConfig | None = field(
        default=None,
        metadata=_spec("EAGLE settings (eagle and specv2; direct: drive EAGLE's passes)"),
    )
    dp: DPConfig | None = field(
        default=None, metadata=_spec("DP attention across ranks (null: one rank)")
    )
    steps: StepsConfig = field(default_factory=StepsConfig, metadata=_spec("step counts"))
    sync_cost: SyncCostConfig | None = field(
        default=None, metadata=_spec("the sync-cost experiment instead of the serving world")
    )

    @property
    def is_spec(self) -> bool:
        return self.serving_mode in ("eagle", "specv2")

    @property
    def world(self) -> str:
        """Which registered world runs the cells (harness.runner.cells.WORLDS)."""
        return "serving" if self.sync_cost is None else "sync_cost"


# ---------------------------------------------------------------------------------------------
# the generic validator


def _type_name(tp: Any) -> str:
    names = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
    if tp in names:
        return names[tp]
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    origin = typing.get_origin(tp)
    if origin is list:
        return f"a list of {_type_name(typing.get_args(tp)[0]).removeprefix('an ').removeprefix('a ')}s"
    return str(tp)


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _fail(msg: str, src: Source, key: str) -> typing.NoReturn:
    raise InputError(msg, file=src.label(key), key=key)


@dataclass
class Source:
    """Where values came from: the file, and which dotted keys `--set` overrode."""

    file: str
    overridden: frozenset[str] = frozenset()

    def label(self, key: str) -> str:
        # a key under an overridden mapping (`--set spec={...}`) came from --set too
        parts = key.split(".")
        if any(".".join(parts[: i + 1]) in self.overridden for i in range(len(parts))):
            return f"{self.file} (--set)"
        return self.file


def _check_scalar(value: Any, tp: Any, meta: dict[str, Any], src: Source, key: str) -> Any:
    if tp is bool:
        if not isinstance(value, bool):
            _fail(f"expected true or false, got {shown(value)}", src, key)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(f"expected an integer, got {shown(value)}", src, key)
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            _fail(f"expected a number, got {shown(value)}", src, key)
        value = float(value)
    elif tp is str:
        if not isinstance(value, str):
            _fail(f"expected a string, got {shown(value)}", src, key)
        choices = meta.get("choices") or (meta["choices_fn"]() if meta.get("choices_fn") else None)
        if choices is not None and value not in choices:
            near = difflib.get_close_matches(value, choices, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            _fail(
                f"unknown value {shown(value)}{hint}; expected one of {', '.join(choices)}",
                src,
                key,
            )
        return value
    # NaN compares false with everything: without this it would pass every range check
    if not math.isfinite(value):
        _fail(f"{value} is not a finite number", src, key)
    lo, hi = meta.get("min"), meta.get("max")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        _fail(f"{shown(value)} out of range [{lo}, {hi}]", src, key)
    return value


def _check_value(value: Any, tp: Any, meta: dict[str, Any], src: Source, key: str) -> Any:
    tp, optional = _unwrap_optional(tp)
    if value is None:
        if optional:
            return None
        _fail(f"expected {_type_name(tp)}, got null", src, key)
    if dataclasses.is_dataclass(tp):
        return from_mapping(tp, value, src, prefix=f"{key}.")
    if typing.get_origin(tp) is list:
        item_tp = typing.get_args(tp)[0]
        items = value if isinstance(value, list) else [value]  # a scalar is a one-item sweep
        if meta.get("nonempty") and not items:
            _fail("must not be empty", src, key)
        if dataclasses.is_dataclass(item_tp):
            return [
                from_mapping(item_tp, v, src, prefix=f"{key}[{i}].") for i, v in enumerate(items)
            ]
        out = [_check_scalar(v, item_tp, meta, src, key) for v in items]
        if len(set(out)) != len(out):
            _fail(f"duplicate entries in {shown(out)}", src, key)
        return out
    return _check_scalar(value, tp, meta, src, key)


def field_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def unknown_key(key: str, known: list[str], src: Source, prefix: str) -> typing.NoReturn:
    near = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {prefix + near[0]!r}?)" if near else ""
    _fail(f"unknown key{hint}; known keys: {', '.join(known)}", src, prefix + key)


def from_mapping(cls: type, raw: Any, src: Source, prefix: str = "") -> Any:
    """Build dataclass `cls` from a parsed YAML mapping, validating every key."""
    key_name = prefix.rstrip(".") or "(top level)"
    if not isinstance(raw, dict):
        _fail(f"expected a mapping, got {type(raw).__name__}", src, key_name)
    hints = typing.get_type_hints(cls)
    known = field_names(cls)
    for k in raw:
        if not isinstance(k, str) or k not in known:
            unknown_key(k if isinstance(k, str) else shown(k), known, src, prefix)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in raw:
            kwargs[f.name] = _check_value(
                raw[f.name], hints[f.name], f.metadata, src, prefix + f.name
            )
    return cls(**kwargs)


def schema_type_at(dotted: str, src: Source) -> Any:
    """The declared type at a dotted key, failing (with did-you-mean) on an unknown one."""
    cls: Any = Scenario
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        prefix = ".".join(parts[:i]) + ("." if i else "")
        if not dataclasses.is_dataclass(cls):
            _fail("not a mapping; cannot set a sub-key", src, prefix.rstrip("."))
        if part not in field_names(cls):
            unknown_key(part, field_names(cls), src, prefix)
        cls, _ = _unwrap_optional(typing.get_type_hints(cls)[part])
    return cls


# Keys of the serving world that a sync-cost experiment does not use: set, they would be
# ignored, so they must keep their defaults there.
SERVING_ONLY = (
    "serving_mode", "prefill_every", "variants", "mirror", "cuda_graph", "cuda_graph_max_bs",
    "prep_in_graph", "forward_us", "kernels", "spec",
)  # fmt: skip


def _check_sync_cost(sc: Scenario, src: Source) -> None:
    defaults = Scenario()
    for key in SERVING_ONLY:
        if getattr(sc, key) != getattr(defaults, key):
            _fail("not used by a sync_cost experiment (its cells come from sync_cost)", src, key)


def check_consistency(sc: Scenario, src: Source) -> Scenario:
    """Rules that involve several keys."""
    from harness.serving.modes import get_serving_mode  # the modes say which mirrors they take

    if sc.sync_cost is not None:
        _check_sync_cost(sc, src)
    if sc.serving_mode == "nonspec" and sc.spec is not None:
        _fail("only for serving_mode eagle, specv2 or direct", src, "spec")
    allowed = get_serving_mode(sc.serving_mode).mirror_settings
    for m in sc.mirror:
        if m not in allowed:
            _fail(
                f"{m!r} is not a choice with serving_mode {sc.serving_mode} "
                f"(expected one of {', '.join(allowed)})",
                src,
                "mirror",
            )
    if sc.is_spec and sc.spec is None:
        sc.spec = SpecConfig()
    if sc.spec is not None and sc.spec.draft_tokens != sc.spec.steps + sc.spec.topk:
        # chain drafting (topk 1): one draft token per step plus the verified one
        _fail(
            f"{sc.spec.draft_tokens} must be spec.steps + 1 ({sc.spec.steps + 1}) with topk 1",
            src,
            "spec.draft_tokens",
        )
    if sc.spec is not None and sc.spec.accept_mean > sc.spec.draft_tokens:
        _fail(
            f"{sc.spec.accept_mean} exceeds draft_tokens ({sc.spec.draft_tokens})",
            src,
            "spec.accept_mean",
        )
    if sc.dp is not None:
        check_dp(sc, sc.dp, src)
    return sc


def check_dp(sc: Scenario, dp: DPConfig, src: Source) -> None:
    """A DP scenario sweeps the exchange backend, the forward and the injection; what differs
    between ranks goes in dp.streams, so the scenario's own sweeps take one value each."""
    if sc.serving_mode != "nonspec":
        _fail("DP attention is modelled with serving_mode nonspec only", src, "dp")
    for key in ("variants", "mirror", "batch_sizes"):
        if len(getattr(sc, key)) != 1:
            _fail("one value with dp (per-rank values go in dp.streams)", src, key)
    if len(dp.streams) > dp.ranks:
        _fail(f"{len(dp.streams)} streams for {dp.ranks} ranks", src, "dp.streams")
    for i, stream in enumerate(dp.streams):
        if stream.idle and (stream.batch_size is not None or stream.prefill_every):
            _fail("an idle rank has no requests to size or prefill", src, f"dp.streams[{i}].idle")
    idle = sum(1 for s in dp.streams if s.idle)
    if idle == dp.ranks:
        _fail("every rank is idle: no rank has work", src, "dp.streams")
    if dp.inject is not None and dp.inject.rank >= dp.ranks:
        _fail(f"rank {dp.inject.rank} of {dp.ranks} ranks", src, "dp.inject.rank")
