"""`grader doctor`: what a TA runs on a freshly set-up Trainium worker before it grades anyone.

It says how many NeuronCores the runtime sees, at which logical-NeuronCore degree (LNC: a
value NEURON_LOGICAL_NC_CONFIG gives that the platform does not support is refused in one
line, as detect() refuses it), which SDK line this machine grades with, and which Trainium
generation it found (the runtime's instance family; a spec whose platform is another
generation's is refused in one line: its thresholds were measured on other hardware), then
grades the course's reference kernels through the whole hardware path (sandboxed compile,
trusted execution, device-side timing) on every timed configuration of the assignment, and
prints each p99 beside the spec's reference latency (its threshold / 1.2: the course sets
thresholds at 120% of the reference's p99) and the threshold. A machine more than 10% off
the spec's numbers grades against thresholds measured elsewhere: re-derive them first.
Each SDK line compiles one NKI dialect: run it with asst4-trainium2 (legacy neuronxcc.nki) on
the legacy line and with asst4-trainium2-nki06 (NKI 0.6) on the current one.
Exit status: 0 all is well; 1 a reference failed, missed its threshold or is >10% off;
2 this machine cannot grade on a NeuronCore at all, or not this spec (one line says why).
"""
from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass

from ..references import REFERENCE_OF_TIER, archive
from ..report_view import view_of
from ..vocabulary import THRESHOLD_FACTOR, Backend

COURSE_MARGIN = THRESHOLD_FACTOR     # thresholds are 120% of the reference's p99 (grader/vocabulary.py)
TOLERANCE = 0.10             # a machine further than this from the spec's numbers needs new thresholds
TIMING = {"legacy": "neuron-profile total_time (device side, one execution per capture)",
          "current": "nrtpy benchmark(mode=\"device\").durations_ms, each call's device events combined"}


@dataclass
class Row:
    test: str
    tier: str
    p99_us: float | None
    reference_us: float
    threshold_us: float
    verdict: str              # "ok", or what is wrong

    @property
    def off(self) -> float | None:
        return None if self.p99_us is None else self.p99_us / self.reference_us - 1.0


def check(spec, cores: tuple[int, ...] = (0,)) -> list[Row]:
    """Grade each tier's references, in the spec's dialect (reference_kernels/ or its nki06/),
    on the spec's timed tests alone (ungated) and compare. A spec this machine's SDK line does
    not compile is refused by grade() (grader.neuron.check_dialect) before any reference runs."""
    from ..grade import GradeOptions, grade
    from ..submission import submission_from_bytes
    timed = tuple(dataclasses.replace(t, gated_by=()) for t in spec.tests if t.timed and t.thresholds_us)
    only_timed = dataclasses.replace(spec, tests=timed, precheck=False)
    rows = []
    for tier, reference in REFERENCE_OF_TIER.items():
        submission = submission_from_bytes("references.tar.gz", archive(only_timed, reference), only_timed)
        report = grade(submission, only_timed, GradeOptions(backend=Backend.NEURON, seed=0, neuron_cores=cores,
                                                            run_precheck=False))
        rows += rows_from_report(only_timed, tier, report)
    return rows


def rows_from_report(spec, tier: str, report) -> list[Row]:
    """The doctor's rows for one tier's reference report (also what the nightly records on a
    trn2 worker): each timed test's p99 against the spec's reference latency and threshold."""
    results = {t.name: t for t in view_of(report).tests}      # the one reading of a report
    rows = []
    for test in spec.tests:
        if not (test.timed and test.thresholds_us) or test.name not in results:
            continue
        threshold = float(test.thresholds_us[tier])
        result = results[test.name]
        row = Row(test.name, tier, result.p99_us, round(threshold / COURSE_MARGIN, 1), threshold, "ok")
        if result.p99_us is None:
            row.verdict = f"{result.status}: {result.message}"[:200]
        elif result.p99_us > threshold:
            row.verdict = "over the threshold"
        elif abs(row.off) > TOLERANCE:
            row.verdict = f">{TOLERANCE:.0%} off the spec's reference"
        rows.append(row)
    return rows


def table(rows: list[Row]) -> str:
    head = f"{'test':<26}{'tier':<11}{'p99 us':>10}{'reference us':>14}{'threshold us':>14}{'vs ref':>9}  verdict"
    lines = [head, "-" * len(head)]
    for r in rows:
        p99 = f"{r.p99_us:.1f}" if r.p99_us is not None else "-"
        off = f"{r.off:+.1%}" if r.off is not None else "-"
        lines.append(f"{r.test:<26}{r.tier:<11}{p99:>10}{r.reference_us:>14.1f}{r.threshold_us:>14.1f}{off:>9}  "
                     f"{r.verdict}")
    return "\n".join(lines)


def main(args) -> int:
    from ..errors import GraderInputError
    from .. import spec as specs
    from .lines import SPEC_OF_LINE, NeuronUnavailable, check_platform, detect
    try:
        setup = detect()
    except NeuronUnavailable as err:
        print(f"grader doctor: {err}", file=sys.stderr)
        return 2
    try:
        spec = specs.load(args.assignment or SPEC_OF_LINE[setup.line])   # by default, the spec this line compiles
    except GraderInputError as err:
        print(f"grader doctor: {err}", file=sys.stderr)
        return 2
    if setup.visible and args.core not in setup.visible:
        print(f"grader doctor: --core {args.core} is not a NeuronCore this process sees (it sees "
              f"{', '.join(map(str, setup.visible))}); pick one of them, or widen NEURON_RT_VISIBLE_CORES",
              file=sys.stderr)
        return 2
    print(f"NeuronCores: {setup.cores} (Neuron runtime {setup.libnrt})")
    print(f"logical NeuronCores: LNC={setup.lnc} ({setup.lnc_source}); " +
          (f"kernels are compiled as kernel[{setup.lnc}] and loaded at it" if setup.line == "current" else
           "every process of a grade runs at it (NEURON_LOGICAL_NC_CONFIG)"))
    print(f"SDK line: {setup.line} ({setup.sdk})" +
          (f", NEFFs run by {setup.nrtpy_python}" if setup.nrtpy_python else f", tools in {setup.tools}"))
    print(f"timing: {TIMING[setup.line]}")
    print(f"generation: {setup.generation()}")
    try:
        check_platform(setup, spec)
    except GraderInputError as err:
        print(f"grader doctor: {err}", file=sys.stderr)
        return 2
    print(f"assignment: {spec.assignment} (spec {spec.spec_version}, thresholds {spec.thresholds_version}); "
          f"reference = threshold / {COURSE_MARGIN:g}; grading the references on NeuronCore {args.core} ...",
          flush=True)
    try:
        rows = check(spec, cores=(args.core,))
    except GraderInputError as err:          # the spec is in the dialect of the other SDK line
        print(f"grader doctor: {err}", file=sys.stderr)
        return 2
    print()
    print(table(rows))
    bad = [r for r in rows if r.verdict != "ok"]
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"line": setup.line, "sdk": setup.sdk, "cores": setup.cores, "lnc": setup.lnc,
                       "platform": setup.platform, "family": setup.family, "size": setup.size,
                       "assignment": spec.assignment,
                       "thresholds_version": spec.thresholds_version,
                       "rows": [dataclasses.asdict(r) | {"off": r.off} for r in rows]}, fh, indent=2)
    print()
    if not bad:
        print(f"all well: every reference kernel runs, meets its threshold and is within {TOLERANCE:.0%} of the "
              f"spec's reference latency")
        return 0
    print(f"{len(bad)} of {len(rows)} rows are not well. A failed reference means this machine cannot grade; "
          f"p99s more than {TOLERANCE:.0%} off mean the thresholds were measured on another machine or SDK: "
          f"re-derive them (the nightly regression proposes 120% of the references' p99) before grading.")
    return 1
