"""Find, read, override (`--set dotted.key=value`) and validate a scenario file."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import InputError, shown
from harness.results.names import check_component
from harness.scenario.schema import Scenario, as_data, parse_scenario, schema_type_at
from harness.scenario.validate import Source
from harness.scenario.yaml_io import MAX_FILE_BYTES, decode_utf8, parse_yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIO_DIR = REPO_ROOT / "scenarios"
# scenarios/sweeps/NAME.yaml, named "sweeps/NAME": long sweeps for a GPU, not gated
SWEEPS = "sweeps"


@dataclass
class LoadedScenario:
    scenario: Scenario
    path: Path
    file_sha256: str  # of the file's bytes, as committed
    overrides: list[str]  # the --set arguments, verbatim

    @property
    def name(self) -> str:
        return self.scenario.name

    def effective(self) -> dict[str, Any]:
        """The validated configuration after overrides, as plain data (for meta.json)."""
        return as_data(self.scenario)

    @property
    def is_sweep(self) -> bool:
        return self.path.resolve().parent == (SCENARIO_DIR / SWEEPS).resolve()


def display_path(path: Path) -> str:
    """Relative to the working folder when inside it: shorter messages."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def scenario_names(folder: Path = SCENARIO_DIR) -> list[str]:
    """The gated scenarios: folder/*.yaml."""
    return sorted(p.stem for p in folder.glob("*.yaml"))


def known_scenarios(folder: Path = SCENARIO_DIR) -> list[str]:
    """Every name `--scenario` takes: the gated scenarios, then the sweeps ("sweeps/NAME")."""
    return [*scenario_names(folder), *(f"{SWEEPS}/{n}" for n in scenario_names(folder / SWEEPS))]


def resolve_path(name_or_path: str, folder: Path = SCENARIO_DIR) -> Path:
    """NAME -> scenarios/NAME.yaml; anything that looks like a path is taken as one."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        if not p.is_file():
            raise InputError("no such scenario file", file=name_or_path)
        return p
    candidate = folder / f"{name_or_path}.yaml"  # NAME, or a sub-folder's: sweeps/NAME
    if not candidate.is_file():
        import difflib

        names = known_scenarios(folder)
        near = difflib.get_close_matches(name_or_path, names, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise InputError(
            f"unknown scenario{hint}; known: {', '.join(names) or 'none'}",
            file=str(candidate),
        )
    return candidate


def parse_override(text: str) -> tuple[str, Any]:
    """'a.b=value' -> ('a.b', YAML-parsed value), so lists and booleans read as in the file."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise InputError(f"expected dotted.key=value, got {shown(text)}", file="--set")
    return key, parse_yaml(raw, "--set", key) if raw.strip() else ""


def override_keys(overrides: list[str]) -> dict[str, Any]:
    """Every dotted key the `--set` arguments set, with its value: a mapping given for a
    section (`--set 'steps={warmup: 1}'`) sets each of its keys, and leaves the section's
    others as they are. Unknown keys fail like the file's do; so does a key set twice."""
    out: dict[str, Any] = {}
    given: dict[str, str] = {}  # key -> the --set argument that set it
    for text in overrides:
        key, value = parse_override(text)
        for leaf, v in _leaves(key, value):
            clash = next((k for k in out if _overlap(k, leaf)), None)
            if clash is not None:
                raise InputError(
                    f"set twice: by {shown(given[clash])} and by {shown(text)}; give each key once",
                    file="--set",
                    key=leaf,
                )
            out[leaf], given[leaf] = v, text
    return out


def _leaves(key: str, value: Any) -> list[tuple[str, Any]]:
    tp = schema_type_at(key, Source("--set"))
    if not (isinstance(value, dict) and dataclasses.is_dataclass(tp)):
        return [(key, value)]
    if not value:  # it would set nothing, or (as it once did) every key to its default
        raise InputError(
            "an empty mapping sets no key; set the keys to change, e.g. --set section.key=value",
            file="--set",
            key=key,
        )
    return [leaf for k, v in value.items() for leaf in _leaves(f"{key}.{k}", v)]


def _overlap(a: str, b: str) -> bool:
    """Whether setting `a` and `b` sets one key twice (one is, or holds, the other)."""
    return a == b or a.startswith(f"{b}.") or b.startswith(f"{a}.")


def apply_overrides(raw: dict[str, Any], keys: dict[str, Any]) -> dict[str, Any]:
    """Set each dotted key in a copy of the raw mapping."""
    out = copy.deepcopy(raw)
    for key, value in keys.items():
        parts = key.split(".")
        node = out
        for part in parts[:-1]:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = {}
                node[part] = nxt
            node = nxt
        node[parts[-1]] = value
    return out


def load_scenario(name_or_path: str, overrides: list[str] | None = None) -> LoadedScenario:
    """Read, override and validate; raises InputError (exit 2) naming the file and key."""
    overrides = list(overrides or [])
    path = resolve_path(name_or_path)
    shown_path = display_path(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InputError(f"larger than {MAX_FILE_BYTES:,} bytes", file=shown_path)
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"unreadable ({exc.strerror})", file=shown_path) from None
    raw = parse_yaml(decode_utf8(data, shown_path), shown_path)
    if raw is None or raw == {}:  # every value would be a hidden default
        raise InputError("empty scenario: no keys (see scenarios/*.yaml)", file=shown_path)
    if not isinstance(raw, dict):
        raise InputError("expected a mapping at the top level", file=shown_path)
    keys = override_keys(overrides)
    src = Source(shown_path, frozenset(keys))
    merged = apply_overrides(raw, keys)
    sc = parse_scenario(merged, src)
    if not sc.name:
        sc.name = path.stem
    check_component(sc.name, file=src.label("name"), key="name")  # a run folder's name
    return LoadedScenario(sc, path, hashlib.sha256(data).hexdigest(), overrides)
