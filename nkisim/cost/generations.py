"""One cost model per NeuronCore generation: each generation is data over the one set of cost
rules (rules.py, scheduler.py), given as its differences from NeuronCore-v3's parameters
(params.py, calibrated on Trainium2), each difference with its status and source.

Status words: "documented" (a page of the Neuron docs gives it), "measured" (a hardware
profile of that generation shows it; bench/profiles.py --platform prints the comparison),
"fit" (fixed by a calibration fact of that generation; bench/fidelity.py --platform
cross-validates it), "assumed" (nothing gives it: the reason is in the source). Every
parameter a generation does not list keeps NC-v3's value: cycle counts at the generation's own
clocks, nanoseconds as they are. `carried_over` names them, so a report can say which parts of
a model no measurement of its generation checked.

Tags: [A2] [A3] [A4] the NKI architecture guides of NC-v2/v3/v4, [DMA] the DMA bandwidth
guide, [MM] the nc_matmul reference (shared/docs/neuroncore-generations.md lists them);
"trn1 profiles" is shared/data/trn1-profiles (README headline facts, numbered).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache

from .params import CostParams

DOCUMENTED, MEASURED, FIT, ASSUMED = "documented", "measured", "fit", "assumed"


@dataclass(frozen=True)
class Parameter:
    name: str               # a CostParams field
    value: object
    status: str             # DOCUMENTED, MEASURED, FIT or ASSUMED
    source: str


@dataclass(frozen=True)
class Generation:
    platform: str           # nkisim.platforms' name: trn1, trn2, trn3
    core: str               # NeuronCore-v2, -v3, -v4
    # what this generation's model was checked against on its own hardware; "" for none, and a
    # report of a run on it says the grade comes from an uncalibrated model
    calibration: str
    differences: tuple[Parameter, ...] = ()

    @property
    def calibrated(self) -> bool:
        return bool(self.calibration)

    @property
    def params(self) -> CostParams:
        return _params(self.platform)

    def carried_over(self) -> tuple[str, ...]:
        """The CostParams fields this generation takes unchanged from NC-v3's model."""
        own = {d.name for d in self.differences}
        return tuple(f.name for f in dataclasses.fields(CostParams) if f.name not in own)


_NCV2_SBUF_PORTS = (("SBUF:DVE+POOL", ("DVE", "POOL"), "sbuf"), ("PSUM:DVE+ACT", ("DVE", "ACT"), "psum"))

GENERATIONS: dict[str, Generation] = {
    "trn2": Generation(
        "trn2", "NeuronCore-v3",
        calibration="26 Trainium2 hardware profiles and 29 whole-kernel facts "
                    "(bench/profiles.py, bench/fidelity.py)"),
    "trn1": Generation(
        "trn1", "NeuronCore-v2",
        calibration="12 Trainium1 hardware profiles of the part-1 vector add: its Vector engine, DMAs and "
                    "fixed costs; the Tensor and Scalar engines keep Trainium2's cycles at Trainium1's clocks "
                    "(bench/profiles.py --platform trn1, bench/fidelity.py --platform trn1)",
        differences=(
            Parameter("pe_ghz", 2.8, DOCUMENTED, "[A2] Tensor Engine clock"),
            Parameter("dve_ghz", 1.12, DOCUMENTED, "[A2] Vector Engine clock"),
            Parameter("act_ghz", 1.4, DOCUMENTED, "[A2] Scalar Engine clock"),
            Parameter("pool_ghz", 1.4, DOCUMENTED, "[A2] GpSimd clock"),
            Parameter("dve_cycles_per_element", 2.02, MEASURED,
                      "trn1 profiles fact 2: fp32 tensor_tensor holds the engine 1.804 ns an element "
                      "(least squares over 1000 and 2000 elements, n = 19) = 2.02 cycles at 1.12 GHz; "
                      "NC-v2 streams 128 elements a cycle whatever the dtype [A2], so every dtype; "
                      "bench/fidelity.py --platform trn1 V5"),
            Parameter("dve_pipeline_ns", 78.6, ASSUMED,
                      "the profiles give only start->end (212.6 ns + 1.804 ns an element); NC-v3's "
                      "pipeline of 88 cycles is kept, at 1.12 GHz"),
            Parameter("dve_overhead_cycles", 150, MEASURED,
                      "trn1 profiles fact 2: 212.6 ns fixed start->end, less the assumed pipeline "
                      "(78.6 ns), is 134 ns = 150 cycles at 1.12 GHz; bench/fidelity.py --platform trn1 V6"),
            Parameter("dve_perf_mode", False, DOCUMENTED,
                      "[A3]: the 16-bit perf mode (its shared bus with GpSimd) is new in NC-v3"),
            Parameter("act_pipeline_ns", 92.8, ASSUMED, "NC-v3's 130 cycles kept, at 1.4 GHz"),
            Parameter("pe_transpose_fp32_factor", 1, DOCUMENTED,
                      "[MM]: NC-v2 has no transpose mode (is_transpose only marks the profile), so "
                      "an fp32 transpose is an fp32 matmul"),
            Parameter("hardware_dge", False, DOCUMENTED,
                      "[A2] has no descriptor-generation engine (DGE is new in NC-v3 [A3]): "
                      "descriptors are prebuilt, and the trn1 profiles' DMAs are triggered from the "
                      "SP and GpSimd queues"),
            Parameter("static_issue_ns", 80.7, MEASURED,
                      "trn1 profiles: the SP engine starts its DMA triggers (0xa5) 80.7 ns apart "
                      "(median, n = 26; each runs 51.4 ns, fact 3, with ~30 ns between), so the k-th "
                      "DMA is issued 80.7 k ns in, as the profiles' are to within 19 ns"),
            Parameter("semaphore_ns", 31.0, MEASURED,
                      "trn1 profiles: a consumer starts 31 ns (median, n = 50) after what it waits "
                      "for: a load's last semaphore write -> DVE 36.9, DVE end -> GpSimd's store "
                      "trigger 16.5, the last store's semaphore write -> the kernel's last wait 34.8 "
                      "(cross-engine times good to +-50 ns, README)"),
            Parameter("dma_hazard_hop_ns", 31.0, ASSUMED,
                      "no hazard in the profiles: taken as the measured semaphore hop, which it is on "
                      "NC-v3 too (params.py)"),
            Parameter("dma_engine_bytes_per_ns", 17.86, FIT,
                      "bench/fidelity.py --platform trn1 V7, V8: in the profiles' chains of loads a "
                      "DMA holds each ring 1826 ns for 32000 B (fd1k, 17.52 B/ns) and 3661 ns for "
                      "64000 B (fd2k, 17.48 B/ns), its semaphore write included; with NC-v3's 5 ns a "
                      "descriptor (partition row) that is 17.86 B/ns (least squares); [DMA] says 17"),
            Parameter("dma_start_latency_ns", 1384.0, MEASURED,
                      "trn1 profiles (bench/profiles.py --platform trn1): a load starts 1384 ns after "
                      "its trigger (median, n = 12; a DMA whose rings were idle at its trigger: the "
                      "median ring's semaphore write - its ring time - the trigger's end); [DMA]'s "
                      "~1.3 us semaphore-to-start is this and the end latency. (Was 1030, one latency "
                      "for loads and stores fitted on the spans V1, V2, now held out)"),
            Parameter("dma_store_start_latency_ns", 669.0, MEASURED,
                      "trn1 profiles: a store starts 669 ns after its trigger (median, n = 12, as the "
                      "loads' above)"),
            Parameter("dma_end_latency_ns", 344.0, MEASURED,
                      "trn1 profiles: a DMA's last ring writes its semaphore 344 ns (median, n = 57; "
                      "p10-p90 217-535) after the median ring, which is where the model's per-engine "
                      "time ends"),
            Parameter("profile_overhead_ns", 15180.0, MEASURED,
                      "trn1 profiles fact 1: total_time - kernel span, median 15.18 us (n = 12, "
                      "14.84-16.84); bench/fidelity.py --platform trn1 V3, V4"),
            Parameter("shared_ports", _NCV2_SBUF_PORTS, DOCUMENTED,
                      "[A2]: the Vector and GpSimd engines cannot access SBUF in parallel, nor the "
                      "Vector and Scalar engines PSUM"),
        )),
    "trn3": Generation(
        "trn3", "NeuronCore-v4", calibration="",
        differences=(
            Parameter("dve_ghz", 1.2, DOCUMENTED, "[A4] Vector Engine clock"),
            Parameter("act_perf_factor_16bit", 2, DOCUMENTED,
                      "[A4]: the Scalar engine streams 256 BF16/FP16/FP8 elements a cycle, 128 of "
                      "other dtypes (its perf mode for tensor_scalar and tensor_copy)"),
            Parameter("dma_engine_bytes_per_ns", 33.0, DOCUMENTED,
                      "[DMA] 33 B/ns an engine (528 GB/s a core)"),
        )),
}


@cache
def _params(platform: str) -> CostParams:
    gen = GENERATIONS[platform]
    return dataclasses.replace(CostParams(), **{d.name: d.value for d in gen.differences})


def generation(platform: str | None) -> Generation:
    """The generation of nkisim's `platform` (None: the process default, trn2 unless
    nkisim.install(platform=...) said otherwise)."""
    from ..platforms import rules_for
    return GENERATIONS[rules_for(platform).name]


def params_for(platform: str | None) -> CostParams:
    """The cost parameters of `platform`'s generation."""
    return generation(platform).params
