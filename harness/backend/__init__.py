"""A model of sglang's DeepSeek-V4 attention-backend metadata, in three code variants.

from harness.backend import BackendConfig, DeepseekV4AttnBackend, MultiStepDraftBackend
backend = DeepseekV4AttnBackend(BackendConfig(model="flash"), pool, device, "after")
backend.init_forward_metadata(batch)            # eager
backend.init_forward_metadata_out_graph(batch, in_capture=False)   # before replay
backend.init_forward_metadata_in_graph(batch)   # recorded in the graph
"""

from harness.backend.backend import VERIFY_LENS_BUFFER_LEN, DeepseekV4AttnBackend, GraphBucket
from harness.backend.config import MODEL_SHAPES, BackendConfig, ModelShape, get_model_shape
from harness.backend.metadata import FullMetadata, RawDecodeMetadata, RawVerifyMetadata
from harness.backend.multistep import MultiStepDraftBackend
from harness.backend.variants import POLICIES, VariantPolicy, get_variant, policy

__all__ = [
    "MODEL_SHAPES",
    "POLICIES",
    "VERIFY_LENS_BUFFER_LEN",
    "BackendConfig",
    "DeepseekV4AttnBackend",
    "FullMetadata",
    "GraphBucket",
    "ModelShape",
    "MultiStepDraftBackend",
    "RawDecodeMetadata",
    "RawVerifyMetadata",
    "VariantPolicy",
    "get_model_shape",
    "get_variant",
    "policy",
]
