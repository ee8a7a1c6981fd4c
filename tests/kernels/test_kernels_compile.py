"""Every Triton kernel compiles for the H200 (sm_90) on this CPU-only machine.

The interpreter is more lenient than the compiler (loop-carried types, constexpr use), so
this ahead-of-time compile (Triton's bundled ptxas, no GPU needed) catches what the
interpreted tests cannot. Runs in a subprocess: this session has TRITON_INTERPRET set.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernels import triton_fused as tf
    from kernels import triton_kernels as tk

    I64_ARGS = {
        "req_ptr", "ends_ptr", "pool_ptr", "loc_ptr", "out_loc_ptr", "f2s_ptr", "idx_ptr",
        "table_ptr", "out_ptr@cumsum", "pool_out", "c4_loc_out", "c128_loc_out",
    }

    def compile_one(fn, consts, tag=""):
        sig = {}
        for name in fn.arg_names:
            if name in consts:
                sig[name] = "constexpr"
            elif name.endswith(("_ptr", "_out")):
                wide = name in I64_ARGS or f"{name}@{tag}" in I64_ARGS
                sig[name] = "*i64" if wide else "*i32"
            else:
                sig[name] = "i32"
        cx = {(fn.arg_names.index(k),): v for k, v in consts.items()}
        triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx),
                       target=GPUTarget("cuda", 90, 32))

    compile_one(tk.expand_uniform_kernel, {"BLOCK": 256})
    compile_one(tk.cumsum_kernel, {"BLOCK": 1024}, "cumsum")
    compile_one(tk.expand_ragged_kernel, {"BLOCK": 256, "LOG": 10})
    compile_one(tk.page_table_kernel, {"PAGE": 256, "BLOCK": 256})
    compile_one(tk.swa_kernel, {"WINDOW": 128, "WIDTH": 128, "BLOCK": 128})
    compile_one(tk.compression_kernel, {"RATIO": 128, "BLOCK": 256})
    compile_one(tk.c128_kernel, {"PAGE": 256, "PER_PAGE": 2, "BLOCK": 512})
    compile_one(tk.sparse_kernel, {"TOPK": 1024, "BLOCK": 1024})
    compile_one(tk.schedule_kernel, {"BLOCK": 1024})
    compile_one(tk.gather_i32_kernel, {"BLOCK": 256})
    for ragged in (False, True):
        compile_one(tf.upgrade_kernel, {
            "PAGE": 256, "PER_PAGE": 2, "WINDOW": 128, "SWA_W": 128, "TOPK": 1024,
            "TOPK_W": 1024, "RAGGED": ragged, "BLOCK_P": 256, "BLOCK_C": 512,
            "BLOCK_W": 128, "BLOCK_S": 1024, "BLOCK_SCHED": 1024,
        })
    print("compiled all")
    """
)


def test_all_kernels_compile_for_sm90():
    triton = pytest.importorskip("triton")
    bin_dir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    if not (bin_dir / "ptxas").exists():
        pytest.skip("triton's bundled ptxas is not available")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"  # silences a Triton 3.9 warning; no floats here
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "compiled all" in proc.stdout
