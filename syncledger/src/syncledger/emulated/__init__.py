"""The emulated device: CUDA-style code on a CPU-only machine, with every sync classified.

Device tensors are CPU tensors wrapped in `EmuTensor`, whose reported device is `meta`. Values
are real, so code that branches on data behaves as on the GPU. Device values reach the host
through one door (every aten op, plus the few Python reads that bypass aten), which records each
read, transfer and wait by the same rules as the CUDA interceptors (`syncledger.rules`).
"""

from syncledger.emulated.mode import emulated_device, emulated_device_beside_gpu
from syncledger.emulated.tensor import EmulationError, EmuTensor, host_values, is_emulated

__all__ = [
    "EmuTensor",
    "EmulationError",
    "emulated_device",
    "emulated_device_beside_gpu",
    "host_values",
    "is_emulated",
]
