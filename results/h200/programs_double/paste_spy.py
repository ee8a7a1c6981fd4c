"""Which paste_mask_in_image calls take a tensor bound (a host read at roi_heads.py:436) on
the GPU and on the CPU, for tv_maskrcnn_eval's inputs; no ledger."""
import json, os, sys
import torch
import torchvision.models.detection.roi_heads as rh
from harness.programs.vision import tv_maskrcnn_eval

calls = []
orig = rh.paste_mask_in_image
def spy(mask, box, im_h, im_w):
    b = [float(v) for v in box]
    tensor_bounds = [not (0 > b[0]), not (im_w < b[2] + 1), not (0 > b[1]), not (im_h < b[3] + 1)]
    calls.append({"box": b, "im": [im_h, im_w], "tensor_bounds": tensor_bounds})
    return orig(mask, box, im_h, im_w)
rh.paste_mask_in_image = spy

out = {}
for dev in ("cuda", "cpu"):
    calls.clear()
    step = tv_maskrcnn_eval(torch.device(dev))
    step()
    out[dev] = list(calls)
    n = sum(sum(c["tensor_bounds"]) for c in calls)
    print(dev, "calls", len(calls), "tensor bounds", n, "reads at 436", 4 * len(calls) + n)
print("same boxes (sorted lists equal):", sorted(c["box"] for c in out["cuda"]) == sorted(c["box"] for c in out["cpu"]))
# pair boxes by nearest box and show flips
import itertools
gpu, cpu = out["cuda"], out["cpu"]
used = set()
for g in gpu:
    best = min((i for i in range(len(cpu)) if i not in used),
               key=lambda i: sum(abs(a - b) for a, b in zip(g["box"], cpu[i]["box"])))
    used.add(best)
    c = cpu[best]
    if g["tensor_bounds"] != c["tensor_bounds"]:
        print("flip gpu", g["box"], g["tensor_bounds"], "cpu", c["box"], c["tensor_bounds"])
print("tf32 cudnn", torch.backends.cudnn.allow_tf32, "matmul", torch.backends.cuda.matmul.allow_tf32)
