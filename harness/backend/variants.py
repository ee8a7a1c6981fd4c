"""How each code state of the backend treats the host mirror ``seq_lens_cpu``.

One backend, three policies (reference section 3). Every hook performs the real operation of
its variant (a host op on the mirror, a device read such as ``.item()`` / ``.tolist()``, or an
assertion), so the sync ledger sees the variant's syncs by itself. Row numbers refer to the
table of reference section 3.

| hook                         | row | before            | after                | dropped             |
| ---------------------------- | --- | ----------------- | -------------------- | ------------------- |
| needs_cpu_seq_lens           |  -  | True              | spec configured      | prep-in-graph off   |
| max_seq_len_may_d2h          |  1  | assert mirror     | mirror, else .item() | mirror, else cap    |
| extend_seq_lens_list_may_d2h | 2,8 | assert mirror     | mirror, else .tolist | None (device-only)  |
| verify_seq_lens_list_may_d2h |  3  | mirror, else .cpu | mirror, else None    | mirror, else None   |
| check_replay_mirror          |  7  | assert + host max | host max if present  | ignores the mirror  |
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class VariantPolicy:
    """`before` (sglang a36c8731, parent of PR #30695): the mirror is required."""

    name: str = "before"
    upstream_commit: str = "a36c8731"

    def needs_cpu_seq_lens(self, spec_configured: bool, prep_in_graph: bool) -> bool:
        return True  # inherited default of the attention-backend base class

    def max_seq_len_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None, capture_max: int
    ) -> int:
        """Row 1: the page-table span of ``_build_forward_metadata`` (no override given)."""
        assert seq_lens_cpu is not None, "DeepSeek-V4 backend requires seq_lens_cpu"
        return int(seq_lens_cpu.max())  # host tensor: no sync

    def extend_seq_lens_list_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None
    ) -> list[int] | None:
        """Rows 2 and 8: host lengths for the prefill / draft-extend expansion."""
        assert seq_lens_cpu is not None, "DeepSeek-V4 backend requires seq_lens_cpu"
        return seq_lens_cpu.tolist()

    def verify_seq_lens_list_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None
    ) -> list[int] | None:
        """Row 3: the host lengths carried by raw verify metadata (prep in graph)."""
        if seq_lens_cpu is not None:
            return seq_lens_cpu.tolist()
        return seq_lens.detach().cpu().tolist()  # D2H: the fallback PR #30695 removed

    # Whether host lengths handed over at replay are used at all (a stale mirror is a hazard
    # only for a variant that reads it).
    reads_replay_mirror: bool = True

    def check_replay_mirror(self, seq_lens_cpu: torch.Tensor | None, bs: int, cap: int) -> None:
        """Row 7: every out-of-graph call checks the batch fits the captured span."""
        assert seq_lens_cpu is not None, "DeepSeek-V4 backend requires seq_lens_cpu"
        assert int(seq_lens_cpu[:bs].max()) <= cap  # host op (the runner's host buffer)


@dataclass(frozen=True)
class AfterPolicy(VariantPolicy):
    """`after` (PR #30695, 504570f4): tolerates an absent mirror by reading the device."""

    name: str = "after"
    upstream_commit: str = "504570f4"

    def needs_cpu_seq_lens(self, spec_configured: bool, prep_in_graph: bool) -> bool:
        # Class default False; set in the constructor when any speculative algorithm is on.
        return spec_configured

    def max_seq_len_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None, capture_max: int
    ) -> int:
        if seq_lens_cpu is not None:
            return int(seq_lens_cpu.max())
        return int(seq_lens.max().item())  # D2H

    def extend_seq_lens_list_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None
    ) -> list[int] | None:
        if seq_lens_cpu is not None:
            return seq_lens_cpu.tolist()
        return seq_lens.tolist()  # D2H fallback on the device lengths

    def verify_seq_lens_list_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None
    ) -> list[int] | None:
        return seq_lens_cpu.tolist() if seq_lens_cpu is not None else None

    def check_replay_mirror(self, seq_lens_cpu: torch.Tensor | None, bs: int, cap: int) -> None:
        if seq_lens_cpu is not None:
            assert int(seq_lens_cpu[:bs].max()) <= cap


@dataclass(frozen=True)
class DroppedPolicy(AfterPolicy):
    """`dropped` (PR #30365, a9cf5e68): device-only paths, no fallback reads device values."""

    name: str = "dropped"
    upstream_commit: str = "a9cf5e68"
    reads_replay_mirror: bool = False

    def needs_cpu_seq_lens(self, spec_configured: bool, prep_in_graph: bool) -> bool:
        # False on CUDA with prep-in-graph on and online-c128 MTP off (not modelled: off).
        return not prep_in_graph

    def max_seq_len_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None, capture_max: int
    ) -> int:
        if seq_lens_cpu is not None:
            return int(seq_lens_cpu.max())
        return capture_max  # the width of req_to_token: no device read

    def extend_seq_lens_list_may_d2h(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor | None
    ) -> list[int] | None:
        return None  # the expansion and the compressor plans run on the device

    def check_replay_mirror(self, seq_lens_cpu: torch.Tensor | None, bs: int, cap: int) -> None:
        return None  # the runner's host buffer may be stale: not consulted


VARIANTS: dict[str, VariantPolicy] = {
    p.name: p for p in (VariantPolicy(), AfterPolicy(), DroppedPolicy())
}


def get_variant(name: str | VariantPolicy) -> VariantPolicy:
    if isinstance(name, VariantPolicy):
        return name
    try:
        return VARIANTS[name]
    except KeyError:
        raise KeyError(f"unknown variant {name!r}; known: {sorted(VARIANTS)}") from None


def variant_names() -> list[str]:
    return list(VARIANTS)
