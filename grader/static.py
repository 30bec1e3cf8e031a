"""The static check of a submission, on its own: what `grade` reports in its header before any
kernel runs (precheck findings per file), callable at upload time so a student learns at once
that a file is rejected even while another of their runs is being graded."""
from __future__ import annotations

from grader.precheck import precheck


def static_findings(sub, spec, *, enabled: bool | None = None) -> list[dict]:
    """Every precheck finding of every submitted file, in file order:
    {"file", "line", "rule", "message", "severity"} ("error" rejects the file, "warning" does not).
    Empty when the precheck is off (`enabled`, default: as the spec says)."""
    if not (spec.precheck if enabled is None else enabled):
        return []
    findings = []
    for key, source in sub.files.items():
        name = sub.filenames.get(key, key)
        for v in precheck(source, name, entry_points=tuple(spec.files[key].functions), dialect=spec.dialect):
            findings.append({"file": name, "line": v.line, "rule": v.rule, "message": v.message,
                             "severity": getattr(v, "severity", "error")})
    return findings
