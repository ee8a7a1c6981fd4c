"""torchvision's detection and segmentation models and timm's ViT, tiny and random. PyPI's
torchvision links its C++ ops (NMS, RoIAlign) against CUDA's libraries, so these run where a CUDA
build of PyTorch is installed: on a GPU (`make gpu-check`), not in the CPU test suite."""

from __future__ import annotations

from typing import Any

import torch

from harness.programs.registry import Step, program

_TV = ("torchvision",)


def _images(device: torch.device, n: int = 2, size: int = 128) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    return [torch.rand(3, size, size, generator=g).to(device) for _ in range(n)]


def _eval(model: Any, inputs: Any) -> Step:
    def step() -> Any:
        with torch.no_grad():
            return model(inputs)

    return step


def _detection(builder: Any, device: torch.device) -> Step:
    # Double precision: how many host reads pasting the masks makes depends on where the boxes
    # fall, and in float32 a GPU and a CPU find other boxes, so the emulated device would count
    # another program than the GPU runs.
    torch.manual_seed(0)
    model = builder(weights=None, weights_backbone=None, num_classes=5, min_size=128, max_size=128)
    images = [image.double() for image in _images(device)]
    return _eval(model.to(device, torch.float64).eval(), images)


@program(
    "torchvision",
    "Faster R-CNN (ResNet-50 FPN), eval on two images: NMS in C++",
    needs=_TV,
    cpu_torch=False,
)
def tv_fasterrcnn_eval(device: torch.device) -> Step:
    from torchvision.models.detection import fasterrcnn_resnet50_fpn

    return _detection(fasterrcnn_resnet50_fpn, device)


@program(
    "torchvision",
    "Mask R-CNN (ResNet-50 FPN), eval: NMS and RoIAlign in C++",
    needs=_TV,
    cpu_torch=False,
)
def tv_maskrcnn_eval(device: torch.device) -> Step:
    from torchvision.models.detection import maskrcnn_resnet50_fpn

    return _detection(maskrcnn_resnet50_fpn, device)


@program("torchvision", "FCN (ResNet-50) semantic segmentation, eval", needs=_TV, cpu_torch=False)
def tv_fcn_segmentation(device: torch.device) -> Step:
    from torchvision.models.segmentation import fcn_resnet50

    torch.manual_seed(0)
    model = fcn_resnet50(weights=None, weights_backbone=None, num_classes=4)
    return _eval(model.to(device).eval(), torch.stack(_images(device)))


@program(
    "torchvision", "batched NMS called directly (the C++ op alone)", needs=_TV, cpu_torch=False
)
def tv_batched_nms(device: torch.device) -> Step:
    from torchvision.ops import batched_nms

    g = torch.Generator().manual_seed(8)
    boxes = torch.rand(300, 4, generator=g) * 100
    boxes[:, 2:] += boxes[:, :2]
    scores = torch.rand(300, generator=g)
    classes = torch.randint(0, 4, (300,), generator=g)
    args = boxes.to(device), scores.to(device), classes.to(device)
    return lambda: batched_nms(*args, 0.5)


@program("timm", "ViT-tiny forward on two images", needs=("timm",), cpu_torch=False)
def timm_vit_tiny(device: torch.device) -> Step:
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10)
    return _eval(model.to(device).eval(), torch.stack(_images(device, size=224)))
