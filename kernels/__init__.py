"""Metadata kernels for the DeepSeek-V4 attention backend: a PyTorch reference and Triton
kernels behind one interface. Imports nothing from `harness`; importing it never imports triton.

    import kernels
    ops = kernels.get_ops("triton")      # or "torch"
    full = ops.upgrade(kernels.UpgradeInputs(...))
"""

from kernels.api import (
    C4_RATIO,
    C128_RATIO,
    INDEX_TOPK_FLASH,
    INDEX_TOPK_PRO,
    KV_PAGE_SIZE,
    NULL_SLOT,
    PAGE_INDEX_ALIGN,
    SWA_WINDOW,
    TOPK_CLUSTER_THRESHOLD,
    FullMetadataTensors,
    MetadataOps,
    UpgradeInputs,
    available_ops,
    c128_width,
    get_ops,
    num_pages_for,
    pad64,
    register_ops,
)

__all__ = [
    "C4_RATIO",
    "C128_RATIO",
    "INDEX_TOPK_FLASH",
    "INDEX_TOPK_PRO",
    "KV_PAGE_SIZE",
    "NULL_SLOT",
    "PAGE_INDEX_ALIGN",
    "SWA_WINDOW",
    "TOPK_CLUSTER_THRESHOLD",
    "FullMetadataTensors",
    "MetadataOps",
    "UpgradeInputs",
    "available_ops",
    "c128_width",
    "get_ops",
    "num_pages_for",
    "pad64",
    "register_ops",
]
