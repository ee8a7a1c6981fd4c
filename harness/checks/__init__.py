"""Checks that measure the backend and the serving world from outside, on a GPU against the
emulated device (and the seeded cases they share with the tests).

Kept out of `harness.backend`, which knows nothing about measurement beyond marking regions.
"""
