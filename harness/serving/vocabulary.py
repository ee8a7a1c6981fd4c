"""How the serving world names its cells for readers: the backend's variants in the order tables
and figures show them, the reference every other variant is compared with, and the mirror
settings. The backend's own registry (harness.backend.variants) defines the variants; this is
their reading order, kept free of torch so the report can use it (a test holds the two equal)."""

from __future__ import annotations

VARIANTS = ("before", "after", "dropped")
REFERENCE = "before"  # the parent of the PR: what `after` and `dropped` are measured against
# "auto": what upstream's serving code does; "present" / "absent": what-ifs where the serving
# mode has a switch for it (the spec-v2 relay; the backend driven directly)
MIRRORS = ("auto", "present", "absent")
