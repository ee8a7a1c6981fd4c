"""The one output writer (syncledger.outputs): an output never replaces what is not a regular
file (a device stands for itself here as a FIFO and a socket: tests never touch /dev), never a
symbolic link, never another output of the command or one of its inputs, and a relative path
means the folder the command started in."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from syncledger.errors import InputError
from syncledger.outputs import OutputPlan, write_atomic


@pytest.fixture
def odd_paths(tmp_path) -> dict[str, Path]:
    """Paths that exist and are not regular files, each left as it was by a refusal."""
    fifo, sock, folder = tmp_path / "fifo", tmp_path / "sock", tmp_path / "folder"
    os.mkfifo(fifo)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock))
    folder.mkdir()
    target = tmp_path / "target.json"
    target.write_text("kept")
    link, dangling = tmp_path / "link.json", tmp_path / "dangling.json"
    link.symlink_to(target)
    dangling.symlink_to(tmp_path / "nowhere.json")
    yield {"a FIFO": fifo, "a socket": sock, "a folder": folder, "a symbolic link": link}
    server.close()


def test_an_output_on_what_is_not_a_regular_file_is_refused(odd_paths, tmp_path):
    kinds = {p: p.lstat().st_mode for p in odd_paths.values()}
    for kind, path in odd_paths.items():
        with pytest.raises(InputError, match=f"{path}: --json: is {kind}"):
            OutputPlan().write(path, "--json")
        with pytest.raises(InputError, match=f"is {kind}"):  # at the rename too
            write_atomic(path, "{}")
    with pytest.raises(InputError, match="is a symbolic link"):
        OutputPlan().write(tmp_path / "dangling.json", "--json")
    assert {p: p.lstat().st_mode for p in odd_paths.values()} == kinds
    assert (tmp_path / "target.json").read_text() == "kept"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_one_file_is_one_output_however_it_is_named(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "sub")
    plan = OutputPlan()
    plan.write(tmp_path / "sub" / "v.json", "--json")
    for same in (tmp_path / "sub" / ".." / "sub" / "v.json", tmp_path / "alias" / "v.json"):
        with pytest.raises(InputError, match="is the output of --json too: two outputs"):
            plan.write(same, "--junit")


def test_an_output_never_lands_on_an_input(tmp_path):
    run = tmp_path / "counts.csv"
    run.write_text("a,b\n")
    os.link(run, tmp_path / "hard.csv")  # another name of the very file
    plan = OutputPlan()
    plan.read(run, "RUN")
    for path in (run, tmp_path / "hard.csv"):
        with pytest.raises(InputError, match=r"is an input of this command \(RUN\)"):
            plan.write(path, "-o")
    written = OutputPlan()
    written.write(tmp_path / "v.json", "--json")
    with pytest.raises(InputError, match="is the output of --json too: an output never"):
        written.read(tmp_path / "v.json", "--baselines")
    assert run.read_text() == "a,b\n"


def test_relative_paths_mean_the_folder_the_command_started_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = OutputPlan()
    out = plan.write("out/v.json", "--json")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # what the profiled script may do
    write_atomic(out, "{}")
    assert (tmp_path / "out" / "v.json").read_text() == "{}"
    assert plan.absolute("x") == tmp_path / "x"
