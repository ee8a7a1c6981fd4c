"""Scenario schema: the committed files validate; bad input is exit 2, one line, nothing written."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.errors import InputError
from harness.scenario import load_scenario, scenario_names
from harness.serving.section import serving_of


def test_committed_scenarios_validate():
    names = scenario_names()
    assert {"nonspec", "eagle", "specv2_mirror"} <= set(names)
    for name in names:
        sc = load_scenario(name).scenario
        assert sc.name == name
        if "serving" not in sc.sections:
            continue  # e.g. sync_cost: no serving world, no graph buckets
        serving = serving_of(sc)
        assert serving.cuda_graph_max_bs is not None
        if sc.world == "serving":  # a DP scenario measures ranks that replay graphs together
            assert max(serving.batch_sizes) > serving.cuda_graph_max_bs, "a batch above the bucket"
    assert serving_of(load_scenario("eagle").scenario).spec.draft_tokens == 4
    assert serving_of(load_scenario("nonspec").scenario).spec is None


@pytest.mark.parametrize(
    ("override", "expect"),
    [
        ("steps.coutn=3", "did you mean 'steps.count'"),
        ("serving.modle=pro", "did you mean 'serving.model'"),
        ("model=pro", "did you mean 'serving.model'"),  # a serving key at the top level
        ("serving.mirror=abset", "did you mean 'absent'"),
        ("serving.variants=[befor, after]", "did you mean 'before'"),
        ("serving.batch_sizes=[0]", "out of range"),
        ("serving.context_len=abc", "expected an integer"),
        ("serving.cuda_graph=3", "expected true or false"),
        ("serving.spec.topk=2", "out of range"),
        ("steps={count: x}", "steps.count"),
        ("serving.spec.accept_mean=9", "exceeds draft_tokens"),
        ("nokey", "expected dotted.key=value"),
    ],
)
def test_bad_override_names_key(override, expect):
    with pytest.raises(InputError) as ei:
        load_scenario("eagle", [override])
    assert expect in str(ei.value)
    assert "\n" not in str(ei.value)


def test_overrides_apply():
    sc = load_scenario(
        "specv2_mirror",
        ["steps.count=3", "serving.batch_sizes=4", "serving.mirror=[present, absent]"],
    ).scenario
    serving = serving_of(sc)
    assert sc.steps.count == 3 and serving.batch_sizes == [4]
    assert serving.mirror == ["present", "absent"]


def test_spec_on_nonspec_rejected():
    with pytest.raises(InputError, match="spec"):
        load_scenario("nonspec", ["serving.spec.steps=2"])


@pytest.mark.parametrize(
    "scenario,mirror", [("nonspec", "absent"), ("eagle", "present"), ("specv2_mirror", "sometimes")]
)
def test_mirror_a_serving_mode_has_no_switch_for_is_rejected(scenario, mirror):
    """Upstream withholds the mirror only in the spec-v2 relay (and the direct mode)."""
    with pytest.raises(InputError, match="mirror") as ei:
        load_scenario(scenario, [f"serving.mirror={mirror}"])
    assert "\n" not in str(ei.value)


def test_bad_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("serving:\n  model: flash\n  batch_size: [4]\n")
    with pytest.raises(InputError) as ei:
        load_scenario(str(bad))
    msg = str(ei.value)
    assert "bad.yaml" in msg and "serving.batch_size" in msg
    assert "did you mean 'serving.batch_sizes'" in msg


def test_cli_exit_2_nothing_written(tmp_path, capsys):
    out = tmp_path / "runs"
    rc = main(
        [
            "bench",
            "--scenario",
            "nonspec",
            "--device",
            "emu",
            "--out",
            str(out),
            "--set",
            "serving.variants=[befor]",
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "nonspec.yaml" in err and "variants" in err
    assert not out.exists()
    rc = main(["bench", "--scenario", "nonspek", "--device", "emu", "--out", str(out)])
    assert rc == 2 and "did you mean 'nonspec'" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("text", ["", "# only a comment\n", "{}\n", "---\n"])
def test_empty_scenario_file_is_refused(tmp_path, capsys, text):
    path = tmp_path / "empty.yaml"
    path.write_text(text)
    out = tmp_path / "runs"
    rc = main(["bench", "--scenario", str(path), "--device", "emu", "--out", str(out)])
    assert rc == 2 and not out.exists()
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "empty.yaml" in err and "empty scenario" in err


def test_sweeps_are_listed_where_scenarios_are(capsys):
    with pytest.raises(InputError, match=r"known: .*sweeps/specv2_batch"):
        load_scenario("specv2")
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    assert "sweeps/specv2_batch" in capsys.readouterr().out.replace("\n", " ")
    with pytest.raises(SystemExit):
        main(["gate", "--help"])
    assert "sweeps" in capsys.readouterr().out
    assert load_scenario("sweeps/specv2_batch").is_sweep and not load_scenario("eagle").is_sweep


SMALL_SWEEP = [
    "--scenario",
    "sweeps/specv2_batch",
    "--device",
    "emu",
    "--no-progress",
    "--set",
    "serving.variants=[after]",
    "--set",
    "serving.batch_sizes=[2]",
    "--set",
    "serving.context_len=512",
    "--set",
    "steps={warmup: 1, count: 2, time_emu: 2}",
]


@pytest.mark.parametrize("asked", [[], ["--pass", "both"]])
def test_a_sweep_on_the_emulated_device_counts_only_unless_asked(tmp_path, capsys, asked):
    import json

    assert main(["bench", *SMALL_SWEEP, "--out", str(tmp_path), *asked]) == 0
    (run,) = list((tmp_path / "specv2_batch").iterdir())
    meta = json.loads((run / "meta.json").read_text())
    err = capsys.readouterr().err
    if asked:
        assert meta["passes"] == ["count", "time"] and meta["rows"]["latency"] > 0
        assert "is a sweep" not in err
    else:
        assert meta["passes"] == ["count"] and meta["rows"]["latency"] == 0
        assert "--pass count" in meta["command"]
        assert "sweeps/specv2_batch.yaml is a sweep: on the emulated device only its count " in err


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("seed: 1\n", "(top level): no section of a world"),
        ("serving: {}\nsync_cost: {}\n", "sections serving + sync_cost are not one world's"),
        ("dp: {}\n", "section dp alone is not a world"),
    ],
)
def test_a_scenario_holds_the_sections_of_one_world(tmp_path, text, expect):
    path = tmp_path / "worlds.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as ei:
        load_scenario(str(path))
    msg = str(ei.value)
    assert expect in msg and "serving + dp" in msg and "\n" not in msg
