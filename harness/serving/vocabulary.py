"""How the serving world names its cells for readers: the variants in the order tables and
figures show them (as harness.variants declares them), the reference every other variant is
compared with, and the mirror settings. Free of torch and of the backend, so the report can
use it."""

from __future__ import annotations

from harness.results.vocabulary import Vocabulary
from harness.variants import reference_variant, variant_names

# "auto": what upstream's serving code does; "present" / "absent": what-ifs where the serving
# mode has a switch for it (the spec-v2 relay; the backend driven directly)
MIRRORS = ("auto", "present", "absent")


def serving_vocabulary() -> Vocabulary:
    """The variants as registered now, the reference, the mirror settings."""
    return Vocabulary(tuple(variant_names()), MIRRORS, reference_variant())
