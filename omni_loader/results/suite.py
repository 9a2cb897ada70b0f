"""metadata.json: the versioned record of the benchmarks a results directory holds.

A results directory is a *suite*: one or more named benchmarks sharing one runs.csv (run ids never
repeat across them), each with its own spec, plan, environment and status::

    {"schema_version": 3,
     "benchmarks": {"load":    {"kind": "reproduce", "spec": ..., "plan": [...], "status": ..., ...},
                    "startup": {"kind": "serve-ab",  "spec": ..., "plan": [...], "status": ..., ...}}}

``reproduce --with-startup`` adds ``startup`` to ``load``, and each must be resumable, checkable and comparable
on its own. Schemas 1 and 2 (load at the top level, serve-ab's under ``"serve_ab"``) are still read, only
through :func:`benchmarks`; writers use :meth:`Record.start` and :func:`store_benchmark`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, is_dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ..errors import ResultsError
from .rows import REJECTED_FILE
from ..safe_files import refuse_link, write_text

SCHEMA_VERSION = 3
# Versions this kit reads (version 1's missing counters and stamps read as empty).
READABLE_SCHEMAS = (1, 2, 3)
METADATA_FILE = "metadata.json"

# The benchmarks a results directory can hold, by member name, and the kind of each.
MEMBERS = {"load": "reproduce", "startup": "serve-ab"}
# The source of a plan entry that does not name one (serve-ab's plans, and every schema-1 plan).
DEFAULT_SOURCES = {"load": "load", "startup": "server"}
# When a status was reached, recorded under this key.
STATUS_STAMPS = {"complete": "finished_at", "interrupted": "interrupted_at"}
# Whether report.md was drawn from the suite's runs (:mod:`omni_loader.results.lifecycle`).
REPORT_KEY = "report"
REPORT_STATUSES = ("not drawn", "drawn")
REPORT_FILE = "report.md"  # the report omni_loader.reporting.report draws from the two files above


def write_metadata(directory: str | os.PathLike[str], metadata: dict[str, Any]) -> Path:
    """Write ``metadata`` (a suite: ``{"benchmarks": {...}}``) as metadata.json, atomically, version first."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    record = {"schema_version": SCHEMA_VERSION, **{k: v for k, v in metadata.items() if k != "schema_version"}}
    path = directory / METADATA_FILE
    refuse_link(path)  # replacing it would not write through it, but it names a file elsewhere: refused
    tmp = path.with_suffix(".json.tmp")
    write_text(tmp, json.dumps(record, indent=2, default=str))  # never through a link
    os.replace(tmp, path)
    return path


def read_metadata(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """metadata.json as written (:meth:`Suite.read`: any readable schema, one-line :class:`ResultsError`)."""
    return Suite.read(directory).raw


# The type of each field a writer records (None always allowed): another type was not written by omni-loader.
_TEXT, _WHOLE, _LIST, _RECORD = (str,), (int,), (list,), (dict,)
RECORD_FIELDS = {"kind": _TEXT, "spec": _RECORD, "environment": _RECORD, "model": _TEXT, "warmup": _WHOLE,
                 "repeats": _WHOLE, "order": _TEXT, "command_line": _TEXT, "started_at": _TEXT, "finished_at": _TEXT,
                 "interrupted_at": _TEXT, "status": _TEXT + (int, float, bool), "resumed_at": _LIST,
                 "repairs": _LIST, "activity": _RECORD, "checkpoint": _RECORD, "sequential": _RECORD,
                 "checkpoint_cache": _RECORD}
SPEC_FIELDS = {"load": _RECORD, "variants": _LIST, "runs": _WHOLE, "warmup": _WHOLE, "seed": _WHOLE,
               "checkpoint": _TEXT, "order": _TEXT, "workers": _TEXT, "layout": _TEXT, "device": _TEXT,
               "dtype": _TEXT, "construct": _TEXT, "read": _TEXT, "cpus": _LIST, "custom_variants": _LIST}
# Fields of a record's objects that are objects themselves (read with .get by the report, compare and pack).
NESTED_RECORDS = {"environment": ("machine", "lock"), "checkpoint": ("synthetic",)}
_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list",
          dict: "an object"}


def _check_types(path: Path, suite: Suite) -> None:
    """Refuse, in one line naming the file and the key, a field of metadata.json whose type no writer gives."""
    metadata = suite.raw
    for key in ("benchmarks", "serve_ab", REPORT_KEY):
        if key in metadata and not isinstance(metadata[key], dict):
            raise _wrong_type(path, key, metadata[key], _RECORD)
    report = metadata.get(REPORT_KEY) or {}
    for key in ("status", "started_at", "drawn_at"):
        if report.get(key) is not None and not isinstance(report[key], str):
            raise _wrong_type(path, f"{REPORT_KEY}.{key}", report[key], _TEXT)
    for name, record in suite.members.items():
        where = f"benchmarks.{name}" if isinstance(metadata.get("benchmarks"), dict) else name
        fields = [(f"{where}.{k}", record[k], RECORD_FIELDS[k]) for k in RECORD_FIELDS if k in record]
        fields += [(f"{where}.{k}.{inner}", record[k][inner], _RECORD) for k, inners in NESTED_RECORDS.items()
                   if isinstance(record.get(k), dict) for inner in inners if inner in record[k]]
        spec = record.get("spec")
        if isinstance(spec, dict):
            fields += [(f"{where}.spec.{k}", spec[k], SPEC_FIELDS[k]) for k in SPEC_FIELDS if k in spec]
            if isinstance(spec.get("variants"), list):
                fields += [(f"{where}.spec.variants[{i}]", v, _TEXT + _RECORD) for i, v in enumerate(spec["variants"])]
        for key, value, types in fields:
            wrong = value is not None and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types))
            if wrong:
                raise _wrong_type(path, key, value, types)


def _wrong_type(path: Path, key: str, value: Any, types: tuple[type, ...]) -> ResultsError:
    shown = json.dumps(value, default=str)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return ResultsError(f"{path}: {key} is {_NAMES.get(type(value), type(value).__name__)} ({shown}), not "
                        f"{_NAMES[types[0]]}: not written by omni-loader (or edited by hand); restore it from a copy")


def benchmarks(metadata: dict[str, Any]) -> dict[str, Record]:
    """The named benchmarks (``load``, ``startup``) recorded in ``metadata``, each as its own record.

    The one place that knows every schema's layout; a member's record never holds ``schema_version``.
    """
    if isinstance(metadata.get("benchmarks"), dict):  # a member that is not a record is the integrity check's finding
        return {name: Record(record) for name, record in metadata["benchmarks"].items()
                if isinstance(record, Mapping)}
    members: dict[str, Record] = {}
    top = {k: v for k, v in metadata.items() if k not in ("serve_ab", "schema_version")}
    if top.get("kind") == MEMBERS["startup"]:
        members["startup"] = Record(top)
    elif "plan" in top or "spec" in top or "kind" in top:
        members["load"] = Record(top)
    if isinstance(metadata.get("serve_ab"), dict):
        members["startup"] = Record(metadata["serve_ab"])
    return members


def benchmark(metadata: Suite | dict[str, Any], name: str) -> Record | None:
    """One named benchmark of ``metadata`` (``load`` or ``startup``), or None when the directory has none."""
    return Suite.of(metadata).benchmark(name)


# The load options schemas 1 and 2 kept flat among the other settings (not today's list: LoadOptions' fields).
FLAT_LOAD_OPTIONS = ("layout", "device", "dtype", "construct")


class Record(dict[str, Any]):
    """One benchmark's record in metadata.json (kind, spec, plan, environment, status and its stamps).

    It is the mapping it was written as (any readable schema), so every reader of a record reads it; what several
    readers derive from it is derived here once. A writer does not edit one: it makes the next (:meth:`start`,
    :meth:`with_status`, :meth:`resumed`).
    """

    @classmethod
    def start(cls, kind: str, spec: Any, plan: Iterable[Any], device: str, *, warmup: int, repeats: int,
              order: str, model: str | None, **described: Any) -> Record:
        """The record of one benchmark as every writer starts it, status ``running``."""
        from .metadata import command_line, environment, now_iso

        return cls({"kind": kind, "spec": _plain(spec), **described, "warmup": warmup, "repeats": repeats,
                    "order": order, "model": model, "plan": [_plain(entry) for entry in plan],
                    "environment": environment(device), "command_line": command_line(), "started_at": now_iso(),
                    "status": "running"})

    @property
    def plan(self) -> list[dict[str, Any]]:
        """Its plan entries that can be read (a dict with an integer run id)."""
        plan = self.get("plan")
        if not isinstance(plan, list):
            return []
        return [e for e in plan if isinstance(e, dict) and isinstance(e.get("run_id"), int)
                and not isinstance(e.get("run_id"), bool)]

    @property
    def load_options(self) -> dict[str, Any]:
        """The load options a load benchmark's record names, as recorded (schema 3 nested, 1 and 2 flat)."""
        spec = self.get("spec") or {}
        if isinstance(spec.get("load"), dict):
            return dict(spec["load"])
        return {k: spec[k] for k in FLAT_LOAD_OPTIONS if k in spec}

    @property
    def settings(self) -> dict[str, Any]:
        """Its spec with the load options among the other settings, whatever the schema."""
        spec = {k: v for k, v in (self.get("spec") or {}).items() if not (k == "load" and isinstance(v, dict))}
        return {**spec, **self.load_options}

    environment = property(lambda self: self.get("environment") or {})

    @property
    def seconds(self) -> float | None:
        """From its start stamp to its finish stamp (None while it has no finish)."""
        from datetime import datetime

        try:
            took = datetime.fromisoformat(self["finished_at"]) - datetime.fromisoformat(self["started_at"])
        except (KeyError, TypeError, ValueError):
            return None
        return took.total_seconds()

    def with_status(self, status: str, **fields: Any) -> Record:
        """This record with ``status`` (running, complete, interrupted), stamped with when it was reached."""
        from .metadata import now_iso

        stamp = STATUS_STAMPS.get(status)
        return Record({**self, "status": status, **fields, **({stamp: now_iso()} if stamp else {})})

    def resumed(self, set_aside: int = 0, why: Iterable[str] = ()) -> Record:
        """This record continued by ``--resume``: running again, the time noted, set-aside rows a repair."""
        from .metadata import now_iso

        out = {**self, "status": "running", "resumed_at": [*self.get("resumed_at", []), now_iso()]}
        if set_aside:
            out["repairs"] = [*self.get("repairs", []),
                              {"at": now_iso(), "rows": set_aside, "file": REJECTED_FILE, "why": list(why)}]
        return Record(out)


@dataclass(frozen=True)
class Suite:
    """metadata.json as read (``raw``, any readable schema), its benchmarks found once."""

    raw: dict[str, Any]

    @classmethod
    def of(cls, metadata: Suite | dict[str, Any]) -> Suite:
        """``metadata`` as a suite: a dict read from metadata.json is wrapped, a suite is itself."""
        return metadata if isinstance(metadata, Suite) else cls(metadata)

    @classmethod
    def read(cls, directory: str | os.PathLike[str]) -> Suite:
        """``directory``'s metadata.json, any readable schema; one-line :class:`ResultsError` when it cannot be read
        or holds a field whose type no writer gives."""
        path = Path(directory) / METADATA_FILE
        if not path.is_file():
            raise ResultsError(f"not a results directory (no {METADATA_FILE}): {directory}")
        try:
            raw = json.loads(path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ResultsError(f"{path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}): "
                               "it was not written by omni-loader or is damaged; restore it from a copy") from None
        except json.JSONDecodeError as exc:
            raise ResultsError(f"{path} is not valid JSON ({exc})") from None
        except RecursionError:
            raise ResultsError(f"{path} is nested too deeply to be read: it was not written by omni-loader") from None
        version = raw.get("schema_version") if isinstance(raw, dict) else None
        if version not in READABLE_SCHEMAS:
            newer = isinstance(version, int) and version > SCHEMA_VERSION
            raise ResultsError(
                f"{path} has schema_version {version!r}; this omni-loader reads versions "
                f"{', '.join(map(str, READABLE_SCHEMAS))}" + (" (upgrade omni-loader to read it)" if newer else "")
            )
        suite = cls(raw)
        _check_types(path, suite)
        return suite

    @cached_property
    def members(self) -> dict[str, Record]:
        """Each benchmark's record by name (``load``, ``startup``)."""
        return benchmarks(self.raw)

    def benchmark(self, name: str) -> Record | None:
        """Benchmark ``name``'s record, or None when the suite has none."""
        return self.members.get(name)

    @property
    def described(self) -> Record:
        """The record a report or a comparison describes: the load benchmark's, else the startup one's, else empty."""
        return self.benchmark("load") or self.benchmark("startup") or Record()

    @property
    def spec(self) -> dict[str, Any]:
        """What the described benchmark was asked to measure, flat (:attr:`Record.settings`); {} when not recorded."""
        return self.described.settings

    @property
    def status(self) -> str | None:
        """The first of its benchmarks' statuses that is not ``complete``, else ``complete`` (None: no benchmark)."""
        statuses = [record.get("status") for record in self.members.values()]
        return next((s for s in statuses if s != "complete"), "complete" if statuses else None)

    @cached_property
    def plan(self) -> dict[int, dict[str, Any]]:
        """run_id -> plan entry (variant, warmup, order, source) of every benchmark."""
        return {int(entry["run_id"]): {"source": DEFAULT_SOURCES.get(name, "load"), **entry}
                for name, record in self.members.items() for entry in record.plan}

    @property
    def report(self) -> dict[str, Any] | None:
        """Whether report.md was drawn (its ``status``, ``started_at``, ``drawn_at``), or None where the suite does not
        record it (written before drawing was recorded)."""
        report = self.raw.get(REPORT_KEY)
        return dict(report) if isinstance(report, dict) else None


def _plain(value: Any) -> Any:
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else value


def store_benchmark(directory: str | os.PathLike[str], name: str, record: Mapping[str, Any]) -> Path:
    """Write member ``name`` of the directory's suite as schema 3, keeping the others. Under the writer lock."""
    if name not in MEMBERS:
        raise ValueError(f"a results directory's benchmarks are {', '.join(MEMBERS)}, not {name!r}")
    suite = Suite.read(directory) if (Path(directory) / METADATA_FILE).is_file() else Suite({})
    kept = {} if suite.report is None else {REPORT_KEY: suite.report}
    return write_metadata(directory, {"benchmarks": {**suite.members, name: Record(record)}, **kept})


def store_report(directory: str | os.PathLike[str], status: str, suite: Suite | None = None) -> Suite:
    """Record whether report.md is drawn, keeping the benchmarks; the suite written. Under the lock."""
    from .metadata import now_iso

    if status not in REPORT_STATUSES:
        raise ValueError(f"a report is {' or '.join(REPORT_STATUSES)}, not {status!r}")
    suite = Suite.read(directory) if suite is None else suite
    report = {**(suite.report or {}), "status": status}
    report.update({"started_at": now_iso()} if status == "not drawn" else {"drawn_at": now_iso()})
    written = Suite({"benchmarks": suite.members, REPORT_KEY: report})
    write_metadata(directory, written.raw)
    return written
