"""How each code state of the backend treats the host mirror ``seq_lens_cpu``.

One backend, three policies. Every hook performs the real operation of its commit (a host op on
the mirror, a device read such as ``.item()`` / ``.tolist()``, or an assertion), so the sync
ledger sees each variant's syncs by itself. Hooks whose name ends in ``_may_d2h`` read the
device in some variant. The fidelity table (``harness/fidelity/upstream_syncs.yaml``) names
the upstream line of each; the ids in comments (``F01`` ...) are its rows.

| hook                            | row | before (a36c8731)  | after (504570f4)      | dropped (a9cf5e68)     |
| ------------------------------- | --- | ------------------ | --------------------- | ---------------------- |
| needs_cpu_seq_lens              |  -  | True               | spec configured       | prep-in-graph off      |
| check_build_mirror              | F01 | assert present     | -                     | -                      |
| max_seq_len_may_d2h             | F01 | host max           | host max, else .item()| host max, else the cap |
| extend_lens_host_may_d2h        | F02 | mirror .tolist()   | mirror, else .tolist()| assert mirror; .tolist |
| verify_lens_host_may_d2h        | F03 | mirror, else .cpu()| mirror, else None     | flag: assert; else None|
| verify_prep_off_lens_may_d2h    | F04 | .tolist() (device) | .tolist() (device)    | mirror, else .tolist() |
| capture_mirror_may_d2h          | F06 | .cpu()             | .cpu()                | .cpu() if flag         |
| replay_mirror                   | F07 | assert present     | as given              | None unless flag       |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.variants import VARIANTS

if TYPE_CHECKING:
    import torch

MIRROR_REQUIRED = "DeepSeek-V4 backend requires seq_lens_cpu"


# variant name -> its policy; every declared variant (harness.variants) has one
POLICIES: dict[str, VariantPolicy] = {}


def policy(name: str) -> Callable[[type[VariantPolicy]], type[VariantPolicy]]:
    """Implement the declared variant `name` with this policy class."""

    def register(cls: type[VariantPolicy]) -> type[VariantPolicy]:
        if name not in VARIANTS:
            raise ValueError(f"variant {name!r} is not declared in harness.variants")
        if name in POLICIES:
            raise ValueError(f"variant {name!r} implemented twice")
        POLICIES[name] = cls(name=name)
        return cls

    return register


@policy("before")
@dataclass(frozen=True)
class VariantPolicy:
    """`before` (sglang a36c8731, parent of PR #30695): the mirror is required."""

    name: str  # the registered variant's
    # The worker sizes the verify tree mask from ``attn_backend.max_context_len`` when the
    # batch has no mirror; the backend defines that attribute only from a9cf5e68 on.
    has_max_context_len: bool = False
    # DeepSeek-V4 joined the draft-extend CUDA-graph allow-list with PR #30853 (in a9cf5e68).
    draft_extend_graph: bool = False
    # Eager draft-extend: the prefill-style vectorized expansion from host lengths (a36c8731,
    # 504570f4), or the device-only same-length expansion (a9cf5e68).
    draft_extend_same_length: bool = False
    # The verify extend-lengths buffer: built from a host list on the first verify (F05), or
    # allocated with torch.full in the constructor (a9cf5e68).
    verify_buffer_at_construction: bool = False
    # The per-request expansion loop reads its pad value back (F09); a9cf5e68 runs a kernel.
    loop_expansion_reads_pad: bool = True

    def needs_cpu_seq_lens(self, spec_configured: bool, prep_in_graph: bool) -> bool:
        return True  # inherited default of the attention-backend base class

    def check_build_mirror(self, seq_lens_cpu: torch.Tensor | None) -> None:
        """F01: ``_build_forward_metadata`` asserts the mirror before anything else."""
        assert seq_lens_cpu is not None, MIRROR_REQUIRED  # fidelity: F01a

    def max_seq_len_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None, capture_max: int
    ) -> int:
        """F01: the page-table span of ``_build_forward_metadata`` (no override given)."""
        assert seq_lens_cpu is not None
        return int(seq_lens_cpu.max())  # host tensor: no sync

    def extend_lens_host_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None
    ) -> list[int]:
        """F02: host lengths of the prefill (and, eagerly, draft-extend) branch."""
        assert seq_lens_cpu is not None
        return seq_lens_cpu.tolist()

    def verify_lens_host_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None, needs_mirror: bool
    ) -> list[int] | None:
        """F03: the host lengths carried by raw verify metadata (prep in graph)."""
        if seq_lens_cpu is not None:
            return seq_lens_cpu.tolist()
        # D2H: the fallback PR #30695 removed
        return seq_lens.detach().cpu().tolist()  # fidelity: F03

    def verify_prep_off_lens_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None
    ) -> list[int]:
        """F04: verify with prep-in-graph off expands on the host from the device lengths."""
        return seq_lens.tolist()  # fidelity: F04

    def capture_mirror_may_d2h(
        self, seq_lens: torch.Tensor, needs_mirror: bool
    ) -> torch.Tensor | None:
        """F06: out-of-graph work during capture copies the lengths to the host."""
        return seq_lens.cpu()  # fidelity: F06b

    def replay_mirror(
        self, seq_lens_cpu: torch.Tensor | None, needs_mirror: bool
    ) -> torch.Tensor | None:
        """F07: every out-of-graph call before a replay takes the runner's host lengths."""
        assert seq_lens_cpu is not None, MIRROR_REQUIRED  # fidelity: F07
        return seq_lens_cpu


@policy("after")
@dataclass(frozen=True)
class AfterPolicy(VariantPolicy):
    """`after` (PR #30695, 504570f4): tolerates an absent mirror by reading the device."""

    def needs_cpu_seq_lens(self, spec_configured: bool, prep_in_graph: bool) -> bool:
        # Class default False; set in the constructor when any speculative algorithm is on.
        return spec_configured

    def check_build_mirror(self, seq_lens_cpu: torch.Tensor | None) -> None:
        return None

    def max_seq_len_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None, capture_max: int
    ) -> int:
        if seq_lens_cpu is not None:
            return int(seq_lens_cpu.max())
        return int(seq_lens.max().item())  # fidelity: F01

    def extend_lens_host_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None
    ) -> list[int]:
        if seq_lens_cpu is not None:
            return seq_lens_cpu.tolist()
        return seq_lens.tolist()  # fidelity: F02

    def verify_lens_host_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None, needs_mirror: bool
    ) -> list[int] | None:
        return seq_lens_cpu.tolist() if seq_lens_cpu is not None else None

    def replay_mirror(
        self, seq_lens_cpu: torch.Tensor | None, needs_mirror: bool
    ) -> torch.Tensor | None:
        return seq_lens_cpu


@policy("dropped")
@dataclass(frozen=True)
class DroppedPolicy(AfterPolicy):
    """`dropped` (PR #30365, a9cf5e68): device-only paths, no fallback reads device values."""

    has_max_context_len: bool = True
    draft_extend_graph: bool = True
    draft_extend_same_length: bool = True
    verify_buffer_at_construction: bool = True
    loop_expansion_reads_pad: bool = False

    def needs_cpu_seq_lens(self, spec_configured: bool, prep_in_graph: bool) -> bool:
        # False on CUDA with prep-in-graph on and online-c128 MTP off (not modelled: off).
        return not prep_in_graph

    def max_seq_len_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None, capture_max: int
    ) -> int:
        if seq_lens_cpu is not None:
            return int(seq_lens_cpu.max())
        return capture_max  # the width of req_to_token: no device read

    def extend_lens_host_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None
    ) -> list[int]:
        # Regular prefill batches carry the scheduler's host lengths: required, not read back.
        assert seq_lens_cpu is not None, "prefill needs seq_lens_cpu"  # fidelity: F02c
        return seq_lens_cpu.tolist()

    def verify_lens_host_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None, needs_mirror: bool
    ) -> list[int] | None:
        if not needs_mirror:
            return None
        assert seq_lens_cpu is not None, "needs_cpu_seq_lens but no seq_lens_cpu"
        return seq_lens_cpu.tolist()

    def verify_prep_off_lens_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None
    ) -> list[int]:
        if seq_lens_cpu is not None:
            return seq_lens_cpu.tolist()
        return seq_lens.tolist()  # fidelity: F04c

    def capture_mirror_may_d2h(
        self, seq_lens: torch.Tensor, needs_mirror: bool
    ) -> torch.Tensor | None:
        return seq_lens.cpu() if needs_mirror else None  # fidelity: F06c

    def replay_mirror(
        self, seq_lens_cpu: torch.Tensor | None, needs_mirror: bool
    ) -> torch.Tensor | None:
        return seq_lens_cpu if needs_mirror else None  # the runner's buffer may be stale


def get_variant(name: str | VariantPolicy) -> VariantPolicy:
    if isinstance(name, VariantPolicy):
        return name
    if name not in VARIANTS:
        raise KeyError(f"unknown variant {name!r}; known: {sorted(VARIANTS)}")
    if name not in POLICIES:
        raise KeyError(f"variant {name!r} is declared but the backend implements no policy for it")
    return POLICIES[name]
