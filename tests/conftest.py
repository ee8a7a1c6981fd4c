"""Shared test set-up: Triton's interpreter on CPU, and the sync plugin when not installed."""

from __future__ import annotations

import os

# Triton must see this before it is imported anywhere, or kernels try to compile for a GPU.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Installed projects register the plugin through its entry point; running from a source
    # tree (PYTHON=python3 on a GPU box) does not, so register it here once.
    if not config.pluginmanager.has_plugin("harness_sync"):
        import harness.sync.pytest_plugin as plugin

        if not config.pluginmanager.is_registered(plugin):
            config.pluginmanager.register(plugin, "harness_sync")
