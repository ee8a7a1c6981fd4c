"""Sync and latency harness for DeepSeek-V4 attention metadata."""

__version__ = "0.1.0"
