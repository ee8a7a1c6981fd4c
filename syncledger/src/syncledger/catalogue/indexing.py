"""Indexing: masks, host and device indices, Python and device scalars."""

from __future__ import annotations

import torch

from syncledger.catalogue import case
from syncledger.events import SyncKind

D2H, H2D = SyncKind.D2H_READ, SyncKind.H2D_BLOCKING


def _set(t: torch.Tensor, index: object, value: object) -> None:
    t[index] = value


# ---- t[index] -------------------------------------------------------------------------------
case("getitem_device_index", lambda t, dev: t["d"][t["idx"]])
case("getitem_bool_mask", lambda t, dev: t["d"][t["mask"]], {D2H: 1})
case("getitem_host_index", lambda t, dev: t["d"][t["host_idx"]], {H2D: 1})  # index copied in
# a host mask becomes indices on the host, in pinned memory, copied without a wait
case("getitem_host_bool_mask", lambda t, dev: t["d"][t["host_mask"]])
case("getitem_list_index", lambda t, dev: t["d"][[0, 2]], {H2D: 1})

# ---- t[index] = value ------------------------------------------------------------------------
# one device mask and a Python number: `masked_fill_` with a host number, no wait
case("setitem_bool_mask_python_scalar", lambda t, dev: _set(t["d"], t["mask"], 0))
case("setitem_bool_mask_device_scalar", lambda t, dev: _set(t["d"], t["mask"], t["z"]), {D2H: 1})
case(
    "setitem_bool_mask_device_vector",
    lambda t, dev: _set(t["d"], t["mask"], t["y"][:5]),
    {D2H: 1},
)
case("setitem_host_bool_mask_device_scalar", lambda t, dev: _set(t["d"], t["host_mask"], t["z"]))
case(
    "setitem_host_bool_mask_python_scalar",
    lambda t, dev: _set(t["d"], t["host_mask"], 5),
    {H2D: 1},  # the number is copied in
)
case("setitem_device_index_device_scalar", lambda t, dev: _set(t["d"], t["idx"], t["z"]))
case("setitem_device_index_python_scalar", lambda t, dev: _set(t["d"], t["idx"], 5), {H2D: 1})
case(
    "setitem_host_index_device_scalar", lambda t, dev: _set(t["d"], t["host_idx"], t["z"]), {H2D: 1}
)
case("setitem_host_index_python_scalar", lambda t, dev: _set(t["d"], t["host_idx"], 5), {H2D: 2})
case("setitem_int_python_scalar", lambda t, dev: _set(t["d"], 0, 5), {H2D: 1})
case("setitem_slice_python_scalar", lambda t, dev: _set(t["d"], slice(0, 2), 0))
case("setitem_slice_device_scalar", lambda t, dev: _set(t["d"], slice(0, 2), t["z"]))
case("index_put_device", lambda t, dev: t["d"].index_put_((t["idx"],), t["z"]))
case("index_put_accumulate", lambda t, dev: t["d"].index_put_((t["idx"],), t["z"], True))

# ---- masked writes -------------------------------------------------------------------------
case("masked_fill_python_scalar", lambda t, dev: t["d"].masked_fill_(t["mask"], 3))
case("masked_fill_device_scalar", lambda t, dev: t["d"].masked_fill_(t["mask"], t["z"]), {D2H: 1})
case(
    "masked_fill_host_scalar",
    lambda t, dev: t["d"].masked_fill_(t["mask"], t["host_idx"][0]),
)
case("masked_scatter", lambda t, dev: t["d"].masked_scatter_(t["mask"], t["y"]))
