"""Imported only by the launcher's fork server (harness.dp.launch preloads it there): the server
imports the ranks' code once, so each rank is a fork that starts without importing torch again,
and it dies with the launcher that started it.

The server's own rule is to exit when it reads the end of a pipe from the launcher, but every
rank it forks holds that pipe's write end too (multiprocessing hands it to each): a SIGKILLed
launcher would leave the server, and a rank blocked in a collective, running. So the kernel SIGKILLs the server when the launcher
dies, and each rank when the server does (harness.dp.lifeline). A server that outlives the
launcher before this import has no ranks yet, and reads the pipe's end.
"""

from __future__ import annotations

import harness.dp.job  # noqa: F401  (the ranks' code: what each fork starts with)
from harness.dp.lifeline import die_with_parent

die_with_parent(None)
