"""Bad scenarios as a user writes them: each is one line naming the file and the key, exit 2,
before any pass, and nothing is written anywhere (inside `--out` or outside it).

Every case goes through the command line (`main`), the way a user meets it; none runs a pass.
"""

from __future__ import annotations

import dataclasses

import pytest

from harness.cli import main
from harness.errors import MAX_MESSAGE
from harness.scenario import load_scenario

TINY = """\
serving:
  model: flash
  serving_mode: nonspec
  batch_sizes: [4]
  context_len: 512
  variants: [after]
steps: {warmup: 0, count: 1}
"""


def _no_pass(*args, **kwargs):
    raise AssertionError("a pass ran although the scenario should have been refused")


@pytest.fixture
def refused(tmp_path, capsys, monkeypatch):
    """Run `bench` with the arguments; assert exit 2, one line, no pass, nothing written."""
    monkeypatch.setattr("harness.runner.repeats.run_count_pass", _no_pass)
    monkeypatch.setattr("harness.runner.repeats.run_time_pass", _no_pass)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cwd").mkdir()

    def run(scenario: str, *sets: str) -> str:
        before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
        argv = ["bench", "--scenario", scenario, "--device", "emu", "--out", "cwd/runs"]
        rc = main([*argv, *(a for s in sets for a in ("--set", s))])
        err = capsys.readouterr().err
        assert rc == 2, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert len(err) < MAX_MESSAGE + 20, "the error echoes too much"
        after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
        assert after == before, "something was written"
        return err.strip()

    return run


def _file(tmp_path, text: str | bytes, name: str = "s.yaml") -> str:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


@pytest.mark.parametrize(
    "name", ["../../x", "../escaped", "/tmp/abs", "a/b", "..", ".", "a\\b", "tab\there"]
)
def test_a_name_is_one_path_component(refused, tmp_path, name):
    err = refused("nonspec", f"name={name!r}")
    assert "name:" in err and "(--set)" in err
    err = refused(_file(tmp_path, f"name: {name!r}\n{TINY}"))
    assert "s.yaml: name:" in err


@pytest.mark.parametrize(
    ("setting", "key"),
    [
        ("serving.forward_us=.nan", "serving.forward_us"),
        ("serving.forward_us=-.inf", "serving.forward_us"),
        ("serving.spec.accept_mean=.nan", "serving.spec.accept_mean"),
        ("dp.timeout_s=.nan", "dp.timeout_s"),
        ("dp.forward_us=[0, .nan]", "dp.forward_us"),
        ("sync_cost.forward_us=[.inf]", "sync_cost.forward_us"),
    ],
)
def test_nan_and_infinity_are_refused_everywhere(refused, setting, key):
    scenario = {"serving.spec": "eagle", "dp.": "dp_attention", "sync_cost": "sync_cost"}
    name = next((v for k, v in scenario.items() if setting.startswith(k)), "nonspec")
    err = refused(name, setting)
    assert f"{key}:" in err and "not a finite number" in err


def test_duplicate_keys_are_refused_with_both_lines(refused, tmp_path):
    text = "seed: 1\nsteps:\n  count: 1\nserving: {variants: [after]}\nsteps:\n  warmup: 0\n"
    err = refused(_file(tmp_path, text))
    assert "s.yaml: duplicate key 'steps' at line 5 (first at line 2)" in err
    err = refused("nonspec", "steps={count: 1, count: 2}")
    assert err.startswith("error: --set: steps: duplicate key 'count' at line 1")


@pytest.mark.parametrize(
    ("setting", "readings"),
    [
        ("serving.batch_sizes=[010]", "'010' at line 1: YAML 1.1 reads it as 8, YAML 1.2 as 10"),
        ("steps.count=1:00", "'1:00' at line 1: YAML 1.1 reads it as 60, YAML 1.2 as text"),
        ("steps.count=1_000", "'1_000' at line 1: YAML 1.1 reads it as 1000, YAML 1.2 as text"),
        ("seed=0b101", "'0b101' at line 1: YAML 1.1 reads it as 5, YAML 1.2 as text"),
    ],
)
def test_a_number_that_yaml_1_1_reads_otherwise_is_refused(refused, setting, readings):
    assert f"--set: {setting.split('=')[0]}: ambiguous number {readings}" in refused(
        "nonspec", setting
    )


def test_a_leading_zero_in_a_file_is_refused_with_its_line(refused, tmp_path):
    err = refused(_file(tmp_path, TINY.replace("batch_sizes: [4]", "batch_sizes: [010]")))
    assert "s.yaml: ambiguous number '010' at line 4: YAML 1.1 reads it as 8, YAML 1.2 as 10" in err


def test_numbers_read_as_yaml_1_2_reads_them():
    sc = load_scenario("nonspec", ["seed=0o17", "steps.count=0x10", "serving.forward_us=1e3"])
    assert (sc.scenario.seed, sc.scenario.steps.count) == (15, 16)
    assert sc.scenario.sections["serving"].forward_us == 1000.0


def test_set_on_a_section_merges_into_it():
    steps = load_scenario("nonspec", ["steps.count=3", "steps={warmup: 1}"]).scenario.steps
    assert (steps.count, steps.warmup) == (3, 1)
    file = load_scenario("eagle").scenario.sections["serving"]
    merged = load_scenario("eagle", ["serving={context_len: 1024}"]).scenario.sections["serving"]
    assert merged == dataclasses.replace(file, context_len=1024)


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["steps.count=1", "steps.count=2"], "--set: steps.count: set twice: by 'steps.count=1'"),
        (["steps.count=3", "steps={count: 4}"], "--set: steps.count: set twice"),
        (["serving.spec=null", "serving.spec.steps=2"], "--set: serving.spec.steps: set twice"),
        (["serving={}"], "--set: serving: an empty mapping sets no key"),
    ],
)
def test_a_key_set_twice_or_an_empty_section_is_refused(refused, sets, message):
    assert message in refused("eagle", *sets)


def test_a_key_with_invisible_or_confusable_characters_is_shown_escaped(refused, tmp_path):
    err = refused(_file(tmp_path, "se\u200bed: 3\n" + TINY))
    assert "s.yaml: 'se\\u200bed': unknown key (did you mean 'seed'?)" in err
    err = refused("nonspec", "s\u0435ed=3")  # a Cyrillic е
    assert "--set: 's\\u0435ed': unknown key (did you mean 'seed'?)" in err


def test_an_alias_bomb_is_refused_fast_and_echoed_short(refused, tmp_path):
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    bomb = _file(tmp_path, "\n".join([*lines, "serving: {batch_sizes: *i}", ""]))
    assert "expands to more than 100,000 values" in refused(bomb)
    nested = _file(tmp_path, "seed: " + "[" * 200 + "]" * 200 + "\n", "deep.yaml")
    assert "nested deeper than" in refused(nested)


def test_a_long_bad_value_is_echoed_short(refused):
    err = refused("nonspec", "serving.variants=[" + "x" * 5000 + "]")
    assert "serving.variants:" in err and "x" * 100 not in err


def test_a_byte_that_is_not_utf8_is_named_with_its_line(refused, tmp_path):
    err = refused(_file(tmp_path, b"seed: 1234\ndescription: caf\xe9\n"))
    assert "not UTF-8: byte 0xe9 at line 2, column 17" in err
    err = refused(_file(tmp_path, "seed: 1234\ndescription: a\x01b\n"))
    assert "at line 2: character U+0001" in err
    # a command line's byte that is not UTF-8 reaches Python as a lone surrogate
    assert "--set: description: not UTF-8: byte 0xe9 at line 1" in refused(
        "nonspec", "description=caf\udce9"
    )


def test_a_context_too_short_for_the_prompts_is_refused_before_any_pass(refused):
    err = refused("nonspec", "serving.context_len=256")
    assert "serving.context_len: 256 is too small" in err and "at least 258" in err
    assert "at least 261" in refused("eagle", "serving.context_len=256")  # 4 draft tokens a step


def test_memory_beyond_what_is_free_is_refused(refused, monkeypatch):
    monkeypatch.setattr("harness.runner.preflight.free_host_bytes", lambda: 16 << 30)
    big = ("serving.batch_sizes=4096", "serving.context_len=1048576")
    err = refused("nonspec", *big)
    # 3 variants' request pools, int32 req_to_token and int64 full_to_swa: 3 x 48 GiB at least
    assert "serving.batch_sizes, serving.context_len:" in err
    assert "alive together in the time pass" in err
    assert "need at least 1" in err and "16.0 GiB is free" in err
    assert "a cell's world" in refused("nonspec", *big, "serving.variants=after")


def test_more_dp_ranks_than_cores_or_memory_are_refused(refused, monkeypatch):
    monkeypatch.setattr("harness.dp.launch.usable_cores", lambda: 2)
    err = refused("dp_attention", "dp.ranks=64")
    assert "dp.ranks: 64 ranks on this host need 64 CPU cores" in err and "found 2" in err
    monkeypatch.setattr("harness.dp.launch.usable_cores", lambda: 64)
    monkeypatch.setattr("harness.runner.preflight.free_host_bytes", lambda: 8 << 30)
    err = refused("dp_attention", "dp.ranks=64")
    assert "dp.ranks" in err and "64 rank processes" in err and "8.0 GiB is free" in err


def test_a_run_whose_every_cell_fails_is_exit_1_with_the_reason(tmp_path, capsys):
    """Both cells fail at their first step (upstream's code without the mirror, as recorded in
    the README's table); the run is written, but it is not a success."""
    sets = ["serving.mirror=absent", "serving.variants=[before, after]", "serving.batch_sizes=4"]
    sets += ["steps.warmup=0", "steps.count=1"]
    argv = ["bench", "--scenario", "specv2_mirror", "--device", "emu", "--pass", "count"]
    argv += ["--out", str(tmp_path), "--no-progress", *(a for s in sets for a in ("--set", s))]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("FAILED: every cell failed; the first: AssertionError")
    assert str(tmp_path / "specv2_mirror") in err
