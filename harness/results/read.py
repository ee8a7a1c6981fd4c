"""Reading a run folder's files back: the one place that checks them against meta.json.

A table cut off mid-row, left header-only or emptied after the run wrote it must never be
summarised, compared, plotted or traced as if whole: every file is checked against the sha256
and row count meta.json recorded when it was written, and refused (InputError, exit 2, one line
naming the file) when it does not match. A run of an older result format is upgraded in memory
as it is read (harness.results.upgrade), one of a newer format or one older than the oldest
upgrade (before checksums nothing can vouch for its tables) is refused.

Reads files only: no torch, no backend (the report must work on a machine that has the
results but not the harness's runtime).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pandas as pd

from harness import registry
from harness.errors import InputError, shown
from harness.results.files import sha256_hex
from harness.results.run_folder import meta_json
from harness.results.tables import COLUMNS, FORMAT_VERSION, RESULT_FORMAT
from harness.results.upgrade import oldest_readable, upgrade_meta, upgrade_table, written_tables

# Columns read as numbers; "" there is a missing value (NaN). Elsewhere "" is a real value
# (e.g. no forward mode) and must not become NaN, which groupby would silently drop.
NUMERIC = (
    "batch_size",
    "step",
    "syncs",
    "value",
    "nbytes",
    "start_us",
    "round",
    "pid",
    "process",
    "wait_ns",
    "idle_after_us",
    "traced",
)


def read_meta(folder: Path) -> dict[str, Any]:
    """A run folder's meta.json in this harness's result format (an older one upgraded),
    refused (InputError naming it) when it is missing, is not JSON, or is of a result format
    this harness does not read."""
    path = Path(folder) / "meta.json"
    try:
        meta = meta_json(folder)
    except FileNotFoundError:
        raise InputError("not a run folder (no meta.json)", file=str(folder)) from None
    except OSError as exc:
        raise InputError(f"unreadable ({exc.strerror})", file=str(path)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not valid JSON ({shown(str(exc))})", file=str(path)) from None
    if not isinstance(meta, dict) or meta.get("result_format") != RESULT_FORMAT:
        raise InputError(
            f"not a run's meta.json (no result_format {RESULT_FORMAT!r})", file=str(path)
        )
    check_format_version(meta.get("result_format_version"), str(path))
    meta = upgrade_meta(meta)
    if not isinstance(meta.get("world"), str):
        raise InputError(
            "missing: a run of this format names its world", file=str(path), key="world"
        )
    known = registry.worlds()
    if meta["world"] not in known:  # nothing would draw or summarise it
        raise InputError(
            f"unknown world {shown(meta['world'])}; this harness knows {', '.join(known)}",
            file=str(path),
            key="world",
        )
    return meta


def check_format_version(version: Any, file: str) -> None:
    """Runs of this harness's result format and of the older ones it upgrades are read; one
    older still lacks what the readers rely on (checksums before 3), a newer one may differ."""
    if not isinstance(version, int) or isinstance(version, bool):
        why = f"result_format_version is {shown(version)}, not a version number"
    elif oldest_readable() <= version <= FORMAT_VERSION:
        return
    elif version < FORMAT_VERSION:
        why = (
            f"older than the oldest this harness reads ({oldest_readable()}): re-run its "
            "`command` to read it here"
        )
    else:
        why = f"newer than this harness's {FORMAT_VERSION}: read it with the harness that wrote it"
    raise InputError(
        f"result format version {shown(version)}, {why}", file=file, key="result_format_version"
    )


def verified_bytes(folder: Path, name: str, meta: dict[str, Any]) -> bytes:
    """The bytes of result file `name`, exactly as the run wrote them (sha256 from meta.json)."""
    path = Path(folder) / name
    expected = (meta.get("sha256") or {}).get(name)
    if expected is None:
        raise InputError(
            "meta.json records no checksum for it: nothing vouches for it", file=str(path)
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"unreadable ({exc.strerror})", file=str(path)) from None
    if sha256_hex(data) != expected:
        rows = (meta.get("rows") or {}).get(path.stem)
        recorded = f"{rows} rows, " if rows is not None else ""
        raise InputError(
            f"does not match meta.json ({recorded}sha256 {expected[:12]}…): cut off or changed "
            "after the run wrote it",
            file=str(path),
        )
    return data


def read_table(folder: Path, table: str, meta: dict[str, Any] | None = None) -> pd.DataFrame:
    """Table `table` of a run folder, checked against meta.json, with numeric columns parsed;
    from a run of an older format, in this format's columns (a table it did not write, empty)."""
    meta = read_meta(folder) if meta is None else meta
    name = f"{table}.csv"
    if table not in written_tables(meta):
        return pd.DataFrame(columns=COLUMNS[table])
    data = verified_bytes(folder, name, meta)
    df = pd.read_csv(
        io.BytesIO(data),
        keep_default_na=False,
        na_values={c: [""] for c in NUMERIC},
    )
    df = upgrade_table(table, df, meta)
    missing = [c for c in COLUMNS[table] if c not in df.columns]
    if missing:  # a renamed or dropped column must fail loudly, not plot as empty
        raise InputError(
            f"missing column(s) {missing}", file=str(Path(folder) / name), key=missing[0]
        )
    for col in NUMERIC:
        if col in df.columns:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def read_json_file(folder: Path, name: str, meta: dict[str, Any]) -> Any:
    """A JSON result file of a run folder (e.g. stacks.json), checked against meta.json."""
    data = verified_bytes(folder, name, meta)
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"malformed JSON ({exc})", file=str(Path(folder) / name)) from None
