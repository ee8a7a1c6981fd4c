"""Device values read on the host: scalars, data-dependent shapes, checks, printing."""

from __future__ import annotations

import contextlib
import io

import torch
import torch.nn.functional as F

from syncledger.catalogue import case
from syncledger.events import SyncKind

D2H = SyncKind.D2H_READ
L = torch.linalg


def _print(t: torch.Tensor) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        print(t)


# ---- a Python value from the device ---------------------------------------------------------
case("item", lambda t, dev: t["d"].sum().item(), {D2H: 1})
case("two_items", lambda t, dev: (t["d"].sum().item(), t["d"].max().item()), {D2H: 2})
case("tolist", lambda t, dev: t["d"].tolist(), {D2H: 1})
case("cpu", lambda t, dev: t["d"].cpu(), {D2H: 1})
case("int", lambda t, dev: int(t["d"][0]), {D2H: 1})
case("float", lambda t, dev: float(t["v"]), {D2H: 1})
case("bool", lambda t, dev: bool(t["d"][0] > 0), {D2H: 1})
case("contains", lambda t, dev: 3 in t["d"], {D2H: 1})
case("equal", lambda t, dev: torch.equal(t["d"], t["y"]), {D2H: 1})
case("equal_same_tensor", lambda t, dev: torch.equal(t["d"], t["d"]))
case("allclose", lambda t, dev: torch.allclose(t["f"], t["f"] + 0), {D2H: 1})
# printing reads every element it shows (`f"{value}"` each), then the whole tensor (`tolist`)
case("repr", lambda t, dev: repr(t["d"]), {D2H: 9})
case("str", lambda t, dev: str(t["d"]), {D2H: 9})
case("print", lambda t, dev: _print(t["d"]), {D2H: 9})
case("fstring_vector", lambda t, dev: f"{t['d']}", {D2H: 9})
# A float tensor's formatting reads more: whether its values are finite and nonzero (1),
# whether each is an integer until one is not, the range checks for scientific notation (1 or 2),
# that choice, a device tensor, at each use (once, then once per element shown), each element
# to size its column, then the whole (`tolist`).
case("repr_float_integers", lambda t, dev: repr(t["f"]), {D2H: 29}, measured=False)
case("print_float_fractions", lambda t, dev: _print(t["f"] / 3), {D2H: 22}, measured=False)
case("fstring_scalar", lambda t, dev: f"{t['z']}", {D2H: 1})
case("format_spec_scalar", lambda t, dev: "{:.1f}".format(t["v"]), {D2H: 1})

# ---- an output whose size comes from device data ---------------------------------------------
case("nonzero", lambda t, dev: t["d"].nonzero(), {D2H: 1})
case("nonzero_as_tuple", lambda t, dev: t["d"].nonzero(as_tuple=True), {D2H: 1})
case("where_condition_only", lambda t, dev: torch.where(t["mask"]), {D2H: 1})
case("argwhere", lambda t, dev: torch.argwhere(t["d"]), {D2H: 1})
case("nonzero_static", lambda t, dev: torch.nonzero_static(t["d"], size=8))
case("masked_select", lambda t, dev: torch.masked_select(t["d"], t["mask"]), {D2H: 1})
# two waits: the output size, then the check that no repeat is negative
case("repeat_interleave_tensor", lambda t, dev: t["d"].repeat_interleave(t["repeats"]), {D2H: 2})
case(
    "repeat_interleave_output_size",
    lambda t, dev: t["d"].repeat_interleave(t["repeats"], output_size=16),
)
case("repeat_interleave_int", lambda t, dev: t["d"].repeat_interleave(2))
case("unique", lambda t, dev: torch.unique(t["d"]), {D2H: 1})
case("unique_counts", lambda t, dev: torch.unique(t["d"], return_counts=True), {D2H: 1})
case("unique_consecutive", lambda t, dev: torch.unique_consecutive(t["d"]), {D2H: 1})
case("unique_dim", lambda t, dev: torch.unique(t["eye"], dim=0), {D2H: 3})
case("bincount", lambda t, dev: torch.bincount(t["d"]), {D2H: 2})  # min check, then max
case("histc_no_range", lambda t, dev: torch.histc(t["f"]), {D2H: 2})  # min and max
case("histc_range", lambda t, dev: torch.histc(t["f"], bins=4, min=0, max=9))
case("one_hot_no_num_classes", lambda t, dev: F.one_hot(t["d"]), {D2H: 1})  # the max
case("one_hot_num_classes", lambda t, dev: F.one_hot(t["d"], num_classes=10))

# ---- device-side work only --------------------------------------------------------------------
case("multinomial_one", lambda t, dev: torch.multinomial(t["f"], 1))
case("multinomial_without_replacement", lambda t, dev: torch.multinomial(t["f"], 2))
case("multinomial_with_replacement", lambda t, dev: torch.multinomial(t["f"], 4, True))
case("nanmedian", lambda t, dev: torch.nanmedian(t["f"]))
case("median", lambda t, dev: torch.median(t["f"]))
case("kthvalue", lambda t, dev: torch.kthvalue(t["f"], 2))
case("sort", lambda t, dev: t["d"].sort())
case("isin", lambda t, dev: torch.isin(t["d"], t["idx"]))
case("count_nonzero", lambda t, dev: torch.count_nonzero(t["d"]))
case("any_unread", lambda t, dev: t["d"].any())
case("max_unread", lambda t, dev: t["d"].max())
case("cumsum", lambda t, dev: t["d"].cumsum(0))
case("randperm", lambda t, dev: torch.randperm(20000, device=dev))

# ---- linear algebra: the `linalg.*` forms check `info` on the host, the `_ex` forms do not ----
case("linalg_inv", lambda t, dev: L.inv(t["eye"]), {D2H: 1})
case("linalg_inv_ex", lambda t, dev: L.inv_ex(t["eye"]))
case("linalg_cholesky", lambda t, dev: L.cholesky(t["eye"]), {D2H: 1})
case("linalg_cholesky_ex", lambda t, dev: L.cholesky_ex(t["eye"]))
case("linalg_solve", lambda t, dev: L.solve(t["eye"], t["eye"]), {D2H: 1})
case("linalg_lu_factor", lambda t, dev: L.lu_factor(t["eye"]), {D2H: 1})
case("linalg_lstsq", lambda t, dev: L.lstsq(t["eye"], t["eye"]), {D2H: 1})
case("linalg_eigh", lambda t, dev: L.eigh(t["eye"]), {D2H: 2})
case("linalg_eigvalsh", lambda t, dev: L.eigvalsh(t["eye"]), {D2H: 2})
case("unique_dim_method", lambda t, dev: t["eye"].unique(dim=0), {D2H: 3})
case("linalg_svd", lambda t, dev: L.svd(t["eye"]), {D2H: 2})
case("linalg_det", lambda t, dev: L.det(t["eye"]))
case("linalg_qr", lambda t, dev: L.qr(t["eye"]))
