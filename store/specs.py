"""Specs as the service keeps them: each spec's TOML once, in the `specs` table under its
content hash, and the one way workers and web get an assignment's typed spec.

    assignment = specs.new_assignment(session, "asst4-trainium2", course=course, name="asst4")
    spec = specs.spec_of(assignment)                                     # grader.AssignmentSpec
    specs.adopt_thresholds(session, assignment, thresholds, "2025-12-01")  # a new row, in force

A row never changes, so a spec built from one is cached by hash for the life of the process."""
from __future__ import annotations

import datetime as dt
import threading

from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from grader.spec import AssignmentSpec, SpecError, from_toml, load, with_thresholds

from . import problem_folders
from .models import Assignment, StoredSpec, ThresholdsVersion

_cache: dict[str, AssignmentSpec] = {}
_lock = threading.Lock()


def stored(session: Session, spec: AssignmentSpec, derived_from: str | None = None) -> StoredSpec:
    """The row holding `spec`'s TOML, added if no assignment used this text before."""
    if not spec.toml:
        raise SpecError(f"{spec.assignment} was built in code, not from TOML: it cannot be stored",
                        "Load the spec with grader.load_spec or grader.spec_from_toml.")
    if spec.base:             # read back as the row's text alone: a problem folder by path, or unpinned, is refused now
        from_toml(spec.toml, spec.assignment)
    problem_folders.hold_pinned(session, spec)    # a folder it pins is not removed before this commits
    row = session.get(StoredSpec, spec.spec_hash)
    if row is None:           # two writers storing one spec at once: the second finds the first's row
        session.execute(insert(StoredSpec).values(
            hash=spec.spec_hash, spec_version=spec.spec_version, thresholds_version=spec.thresholds_version,
            toml=spec.toml, derived_from=derived_from).on_conflict_do_nothing(index_elements=["hash"]))
        row = session.get(StoredSpec, spec.spec_hash)
    with _lock:
        _cache.setdefault(spec.spec_hash, spec)
    return row


def new_assignment(session: Session, spec: AssignmentSpec | str, **fields) -> Assignment:
    """An assignment graded under `spec` (a loaded spec, or a bundled name or a file path), its
    spec stored and its first thresholds version recorded; `fields` are Assignment's other
    columns (course, name, backend, deadline...). The caller commits."""
    if isinstance(spec, str):
        fields.setdefault("spec_name", spec)
        spec = load(spec)
    fields.setdefault("spec_name", spec.assignment)
    fields.setdefault("title", spec.title)
    assignment = Assignment(spec_row=stored(session, spec), **fields)
    session.add(assignment)
    session.add(ThresholdsVersion(assignment=assignment, version=spec.thresholds_version, source="spec",
                                  thresholds=spec.thresholds(), adopted_at=dt.datetime.now(dt.timezone.utc)))
    return assignment


def spec_of(assignment: Assignment) -> AssignmentSpec:
    """The spec in force for an assignment (its row's TOML, checked, cached by hash)."""
    return spec_of_row(assignment.spec_row)     # loaded with the assignment; set before a flush too


def spec_of_row(row: StoredSpec) -> AssignmentSpec:
    return by_hash(row.hash, lambda: row.toml)


def spec_by_hash(session: Session, spec_hash: str) -> AssignmentSpec:
    """The stored spec of this hash (a worker handed a hash in a task message)."""
    def text() -> str:
        row = session.get(StoredSpec, spec_hash)
        if row is None:
            raise SpecError(f"no stored spec has the hash {spec_hash[:12]}",
                            "Store it first (store.specs.stored), then send its hash.")
        return row.toml
    return by_hash(spec_hash, text)


def by_hash(spec_hash: str, toml_text) -> AssignmentSpec:
    """The spec of hash `spec_hash`; `toml_text()` gives its text when it is not cached yet."""
    with _lock:
        spec = _cache.get(spec_hash)
    if spec is not None:
        return spec
    spec = from_toml(toml_text(), f"spec {spec_hash[:12]}")
    if spec.spec_hash != spec_hash:            # a row edited by hand: never grade under a wrong name
        raise SpecError(f"the stored spec {spec_hash[:12]} does not match its hash (its text hashes to "
                        f"{spec.spec_hash[:12]})", "Restore the row's TOML, or store the spec again.")
    with _lock:
        _cache[spec_hash] = spec
    return spec


def adopt_thresholds(session: Session, assignment: Assignment, thresholds: dict, version: str) -> AssignmentSpec:
    """Put new thresholds in force as `version`: a new spec row derived from the one in force
    (the old row stays, for the runs graded under it). The caller commits."""
    old = spec_of(assignment)
    new = with_thresholds(old, thresholds, version)
    assignment.spec_row = stored(session, new, derived_from=old.spec_hash)
    return new
