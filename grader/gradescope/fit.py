"""Does the autograder fit Gradescope's container? Gradescope's defaults are half a virtual
CPU, 768 MB of memory and a 10-minute timeout (40 at most). The build prints the settings an
instructor must choose when the defaults are not enough."""
from __future__ import annotations

import math

from .run import GRACE_S

DEFAULT_MEMORY_MB, DEFAULT_CPUS, DEFAULT_TIMEOUT_MIN, MAX_TIMEOUT_MIN = 768, 0.5, 10, 40
STARTUP_S = 60.0        # run_autograder before the first test: the isolation probe, imports, the fork server
HEADROOM = 1.25         # over a measured peak

# bench/gradescope_fit.py on an honest full submission (the optimized reference kernels), by
# spec sha256: peak memory of the whole process tree (its cgroup's memory.peak, shared memory
# included, as Gradescope's container counts it) and wall time pinned to one CPU.
MEASURED: dict[str, dict] = {
    # asst4-trainium2 spec_version 3 (2025-11-13), score 76, taskset -c 0 on a 2-core box: the larger of
    # the namespaces level (1407 MB, 103 s) and the uid + seccomp fallback (1489 MB, 135 s, box busier)
    "8b117ff7fea781ceec28acebe70931d7e68847f6bff9ef8e70a7f18173c73a2e": {"peak_mb": 1489, "one_cpu_s": 135},
}


def advice(spec, config) -> list[str]:
    lines = []
    if config.mode == "service":
        need_s = config.service.timeout_s + 2 * GRACE_S + STARTUP_S
        lines.append("Memory and CPU: Gradescope's defaults are enough (the container only forwards the "
                     "submission and waits).")
    else:
        budget = config.time_budget_s or spec.time_budget_s
        need_s = budget + 2 * GRACE_S + STARTUP_S
        lines += _local_resources(spec, budget)
    minutes = math.ceil(need_s / 60)
    if minutes > MAX_TIMEOUT_MIN:
        lines.append(f"TOO LONG: the grade may take {minutes} minutes, more than Gradescope's maximum timeout of "
                     f"{MAX_TIMEOUT_MIN}; build again with a shorter --time-budget (or --service-timeout).")
    elif minutes > DEFAULT_TIMEOUT_MIN:
        lines.append(f"SET the autograder timeout to at least {minutes} minutes (Gradescope's default is "
                     f"{DEFAULT_TIMEOUT_MIN}): the grade's budget plus the grader's margins.")
        shorter = _budget_within_default(spec, config)
        if shorter:
            lines.append(f"  (or build with --time-budget {shorter:.0f} to keep the default {DEFAULT_TIMEOUT_MIN} "
                         f"minutes: an honest full grade takes well under that on half a CPU)")
    else:
        lines.append(f"Timeout: Gradescope's default {DEFAULT_TIMEOUT_MIN} minutes is enough (needs {minutes}).")
    return ["Gradescope settings (Assignment > Configure Autograder):", *("  " + line for line in lines)]


def _local_resources(spec, budget: float) -> list[str]:
    measured = MEASURED.get(spec.spec_hash)
    if measured is None:
        return [f"Memory and CPU: not measured for this spec; run `python bench/gradescope_fit.py --assignment "
                f"SPEC --submission SUB` and choose a container with its peak memory x{HEADROOM:g}."]
    lines = []
    need_mb = math.ceil(measured["peak_mb"] * HEADROOM / 256) * 256
    if need_mb > DEFAULT_MEMORY_MB:
        lines.append(f"SET memory to at least {need_mb} MB (measured peak {measured['peak_mb']:.0f} MB; "
                     f"Gradescope's default is {DEFAULT_MEMORY_MB} MB).")
    else:
        lines.append(f"Memory: the default {DEFAULT_MEMORY_MB} MB is enough (measured peak "
                     f"{measured['peak_mb']:.0f} MB).")
    cpus = DEFAULT_CPUS
    while measured["one_cpu_s"] / min(cpus, 1.0) > budget and cpus < 1.0:
        cpus *= 2
    if measured["one_cpu_s"] / min(cpus, 1.0) > budget:
        lines.append(f"TOO SLOW: a full grade takes {measured['one_cpu_s']:.0f} s on one CPU, more than the "
                     f"{budget:.0f} s budget; build with a longer --time-budget.")
    elif cpus > DEFAULT_CPUS:
        lines.append(f"SET CPU to at least {cpus:g} (a full grade takes {measured['one_cpu_s']:.0f} s on one CPU, "
                     f"about {measured['one_cpu_s'] / DEFAULT_CPUS:.0f} s on Gradescope's default half CPU, "
                     f"above the {budget:.0f} s budget).")
    else:
        lines.append(f"CPU: the default half CPU is enough (a full grade takes {measured['one_cpu_s']:.0f} s on "
                     f"one CPU, about {measured['one_cpu_s'] / DEFAULT_CPUS:.0f} s on half).")
    return lines


def _budget_within_default(spec, config) -> float | None:
    """A local budget that fits the default timeout and still leaves an honest full grade on
    half a CPU room to spare (x1.5), or None."""
    measured = MEASURED.get(spec.spec_hash)
    if config.mode != "local" or measured is None:
        return None
    budget = DEFAULT_TIMEOUT_MIN * 60 - 2 * GRACE_S - STARTUP_S
    return budget if measured["one_cpu_s"] / DEFAULT_CPUS * 1.5 <= budget else None
