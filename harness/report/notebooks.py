"""Run the plot notebooks headless against a run folder (CI and `python -m harness notebooks`).

The committed notebooks carry no outputs; executed copies go next to the run. One kernel runs
them all (`NotebookKernel`), and it is always this interpreter: a kernel-spec manager that sees
no installed kernel specs falls back to ipykernel's native spec built from sys.executable, so
nothing is registered and a stray user-level "python3" spec can never pick another Python.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.results.files import atomic_path

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
NOTEBOOKS = ("sync_counts.ipynb", "step_latency.ipynb")
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"


@dataclass
class Executed:
    name: str
    path: Path  # the executed copy
    seconds: float
    error: str | None  # None when every cell ran


def inject_parameters(nb, run: Path | None, root: Path | None = None) -> None:
    """Add a cell after the `parameters` cell that sets RUN (and ROOT) — papermill's convention."""
    import nbformat

    lines = [f"RUN = {json.dumps(str(run)) if run is not None else None}"]
    if root is not None:
        lines.append(f"ROOT = {json.dumps(str(root))}")
    cell = nbformat.v4.new_code_cell("\n".join(lines), metadata={"tags": [INJECTED_TAG]})
    idx = next(
        (
            i
            for i, c in enumerate(nb.cells)
            if PARAMETERS_TAG in c.get("metadata", {}).get("tags", [])
        ),
        -1,
    )
    nb.cells.insert(idx + 1, cell)


def _kernel_manager(socket_dir: Path):
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    specs = KernelSpecManager(kernel_dirs=[], ensure_native_kernel=True)
    # ipc: Unix sockets, no open TCP port on a CI box (and no "unencrypted TCP" warning). The
    # socket files are named from `ip`; it must point into a private folder, or they land in
    # the working directory and stay there.
    return KernelManager(
        kernel_name="python3",
        kernel_spec_manager=specs,
        transport="ipc",
        ip=str(socket_dir / "kernel"),
    )


# Run before each notebook: what one notebook defined, drew or changed stays out of the next
# (imported modules stay loaded: that is the time a shared kernel saves).
_RESET = f"""\
%reset -f
import os as _os
import matplotlib.pyplot as _plt
_plt.close("all")
_os.chdir({str(REPO_ROOT)!r})
del _os, _plt
"""


class NotebookKernel:
    """One kernel for a series of notebooks: started on entry, its namespace reset before each
    notebook, shut down on exit (its process and its socket files).

    nbclient leaves a kernel it was handed running, so the kernel is owned here: a
    NotebookClient per notebook only borrows it."""

    def __init__(self, timeout_s: int = 120):
        self.timeout_s = timeout_s

    def __enter__(self) -> NotebookKernel:
        self._sockets = tempfile.TemporaryDirectory(prefix="harness-kernel-")
        self.km = self.kc = None
        try:
            self.km = _kernel_manager(Path(self._sockets.name))
            # cwd of the kernel: the repo root, so relative run paths mean here what they mean
            # on the command line
            self.km.start_kernel(cwd=str(REPO_ROOT))
            self.kc = self.km.client()
            self.kc.start_channels()
            self.kc.wait_for_ready(timeout=self.timeout_s)
        except BaseException:
            self._shut_down()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._shut_down()

    def _shut_down(self) -> None:
        if self.kc is not None:
            self.kc.stop_channels()
        if self.km is not None:
            if self.km.has_kernel:
                self.km.shutdown_kernel()
            self.km.cleanup_resources()
        self._sockets.cleanup()

    def execute(
        self, name: str, run: Path | None, out_dir: Path, root: Path | None = None
    ) -> Executed:
        """Execute notebooks/<name> with RUN=run; write the executed copy into out_dir."""
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError

        nb = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
        inject_parameters(nb, run, root)
        t0 = time.perf_counter()
        error = None
        reply = self.kc.execute_interactive(
            _RESET, timeout=self.timeout_s, output_hook=lambda msg: None
        )
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"the notebook kernel failed to reset: {reply['content']}")
        client = NotebookClient(nb, km=self.km, timeout=self.timeout_s)
        client.kc = self.kc  # borrowed: the client neither starts nor stops a kernel
        try:
            client.execute()
        except CellExecutionError as exc:
            text = ANSI_ESCAPE.sub("", str(exc)).strip()  # the kernel colours its tracebacks
            error = text.splitlines()[-1] if text else repr(exc)
        seconds = time.perf_counter() - t0
        out_dir.mkdir(parents=True, exist_ok=True)
        out = out_dir / name
        with atomic_path(out) as tmp:
            nbformat.write(nb, tmp)
        return Executed(name, out, seconds, error)


def execute_all(run: Path, out_dir: Path | None = None, timeout_s: int = 120) -> list[Executed]:
    """Execute every plot notebook against a (resolved) run folder, in one kernel."""
    out = out_dir if out_dir is not None else run / "notebooks"
    with NotebookKernel(timeout_s) as kernel:
        return [kernel.execute(n, run.resolve(), out) for n in NOTEBOOKS]
