"""Every constant of the latency model, with where it comes from: the defaults are Trainium2's
(NeuronCore-v3); nkisim.cost.generations gives each other generation as its differences from
these, each with its own source.

Sources: `trn2-cost-model.md` (project docs, section numbers below), which restates the NKI
2.26 docs and hardware measurements on a trn2.3xlarge with compiler 2.21. "fit" marks a
constant fixed by a calibration point (bench/fidelity.py prints every point's error);
"assumed" marks one no measurement pins down.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class CostParams:
    # --- clocks (GHz = cycles per ns); NKI Trainium2 architecture guide, section 2 ---
    pe_ghz: float = 2.4          # Tensor Engine moving-column rate
    dve_ghz: float = 0.96        # Vector Engine
    act_ghz: float = 1.2         # Scalar Engine
    pool_ghz: float = 1.2        # GpSimd

    # --- Tensor Engine (section 3: documented nc_matmul / nc_transpose cycle formulas, refitted
    # on the whole-kernel measurements of trn2-conv-measurements.md, C1 and C2) ---
    pe_overhead_cycles: int = 22         # fit: C1 fp16, a 128x128 by 128x222 matmul takes ~244 cycles (N + 22)
    pe_matmul_min_cycles: int = 128      # fit: the profiles' N = 14 fp16 matmuls issue every 62.5 ns (150 cycles, less
    # the overhead: 128, a cycle per stationary row; bench/fidelity.py M1), not N cycles
    pe_fp32_cycles_per_column: float = 5.07  # fit: C1 fp32, ~1147 cycles at N = 222 (5.2x fp16, not the
    # documented 4x); held out: the course's fp32 optimized reference (T1), which it also fits. The
    # profiles' N = 420 fp32 matmuls (conv-c/d, bench/fidelity.py M3) take 705 ns, 4.0 cycles a
    # column: at 4.0, T1 is -20.8% (docs/cost-model.md, "Short moving rows withdrawn")
    pe_fp32_matmul_min_cycles: int = 1125  # fit: C2 fp32, N = 14 matmuls cost ~0.5 us each, as N = 222 do
    pe_fp32_factor: int = 4              # documented peak ratio (20 vs 79 TFLOPS): roofline and MFU only
    pe_transpose_fp32_factor: int = 2    # NC-v3 transpose mode: fp32 2x faster than fp32 matmul
    pe_transpose_min_cycles: int = 234   # fit: the profiles' 16-bit PE transposes of 128 x 128 (conv-a/b)
    # issue 106.7 ns apart (256 cycles, less the overhead), where an N = 14 matmul takes 150: no
    # 16-bit PE transpose takes fewer (bench/profiles.py; a matmul of N = 128 has no profile)
    # (held out: P3's 64 fp32 transposes kept the PE ~16.2 us busy, 0.25 us each)
    pe_stationary_min: int = 64          # max(min(64, N_stationary), N_moving)
    # --- Vector Engine (section 5 item 6; section 3 note on NC-v3 fp32 throughput) ---
    # The element-wise instructions (rules.dve_ns): the engine is held (N * dve_cycles_per_element
    # / perf factor + dve_overhead_cycles) cycles, N the largest operand; the result lands
    # dve_pipeline_ns later. Measured on the Trn2 profiles (bench/profiles.py, docs/cost-model.md
    # "Vector and Scalar"): back-to-back completion spacing (N + 64) cycles, start->end 91.7 ns more
    dve_cycles_per_element: float = 1.0  # measured: 605 tensor_tensor, 14-2000 el.; P1 (fd2k) is one
    dve_overhead_cycles: int = 64        # measured (spacing - N); the docs' "static instruction overhead"
    dve_pipeline_ns: float = 91.7        # measured: start->end minus spacing, median over n = 605 (p10-p90 90.6-97.8)
    psum_16bit_ns_per_element: float = 3.75  # measured: a Vector or Scalar instruction reading a 16-bit
    # operand out of PSUM (a 16-bit transpose's result: matmuls accumulate fp32) streams it at no
    # more than one element every this many ns a partition, perf mode or not. conv-a/b fp16's 36
    # PSUM->SBUF copies of 128 x 128 PE transposes complete 546 ns apart back to back (fp32's 240);
    # bench/fidelity.py M4. The Scalar engine is assumed to read PSUM no faster (no profile has one)
    # (16-bit performance mode: rules.dve_perf_factor, the Trainium2 architecture guide's 4x / 2x)
    # the documented cost formulas of the later instructions (issue 39: scans, reductions with an
    # accumulator, shuffles, predicated copies, bn_aggr, reciprocal) keep their own form, MIN_II
    # floor included, with N counted as above (no profile has one of them)
    dve_min_ii: int = 64                 # doc: MIN_II, the minimum initiation interval (nki-api.md)
    dve_bn_aggr_cycles_per_triple: int = 13  # doc: SDK 2.26 nki.isa.bn_aggr, "max(MIN_II, 13*(N/3))" cycles
    dve_reciprocal_act_factor: float = 8.0  # doc: nki.isa.reciprocal, the Vector engine's is "about 8x"
    # slower than the Scalar engine's activation(op=nl.reciprocal) for large tiles (SDK 2.21 page,
    # NKI 0.6 reference); SDK 2.26.1 page: max(MIN_II, 8*N) Vector cycles
    dve_predicated_copy_sbuf_factor: int = 2  # doc: SDK 2.26 nki.isa.tensor_copy_predicated, max(MIN_II, 2N)
    # cycles when src and predicate are both in SBUF, max(MIN_II, N) when one is in PSUM
    # NeuronCore-v4's Vector instructions (Trainium3 architecture guide [A4]); unused before NC-v4,
    # which refuses them
    dve_quantize_mx_elements_per_cycle: int = 4  # doc [A4]: QuantizeMX "can quantize four input elements
    # per partition, per cycle (i.e., 4x Vector performance mode)"
    dve_exp_act_speedup: float = 4.0     # doc [A4]: nisa.exponential runs "at 4x the throughput compared to the
    # nisa.activation(op=nl.exp) instruction on the Scalar Engine" (rules.exponential)
    dve_rand2_values_per_cycle: int = 4  # doc [A4]: the Vector engine "can produce 4x 32-bit PRNG values per
    # compute lane per engine cycle"

    # --- Scalar and GpSimd engines (section 5 item 6) ---
    act_overhead_cycles: int = 60        # measured: ACT holds (N + 60) cycles (the transposes' back-to-back
    # 128-element PSUM copies, 156.7 ns apart at the least); was 140, fit on P3's evictions as one duration
    act_pipeline_ns: float = 108.3       # measured: their start->end (265 ns) minus that occupancy
    pool_overhead_cycles: int = 150      # GPSIMD_START ~150 cycles (documented)
    pool_n_gather_elements: int = 512    # doc: nki.isa.nc_n_gather (SDK 2.27+, NKI 0.6): one underlying
    # instruction per 512 elements a partition gathers, "n = ceil(elems_per_partition / 512)"

    # --- cross-engine semaphore hop (section 5 item 2 assumed ~0.1 us) ---
    semaphore_ns: float = 36.6           # measured: the Trn2 profiles' consumer starts 35-38 ns after what it
    # waits for (DVE end -> the store's POOL trigger 35.0-35.9 ns, n = 6 over four vector-add runs; PE
    # transpose end -> its DVE copy 37.9 ns, n = 64, P3 run e; docs/cost-model.md "Compute engines")

    # --- DMA issue (section 2 row DGE; nki-dge.rst; trainium2_arch.rst section DGE) ---
    # Two hardware DGE instances per NeuronCore, triggered from the Sync (SP) or Scalar (ACT)
    # engine's sequencer; `engine=` of dma_copy picks one. "About 600 ns" per DMA is documented;
    # the fit below gives 485 ns for a one-row DMA and 613 ns for a 128-row one.
    dge_issue_ns: float = 485.0          # fit: B1, 76,800 one-row DMAs in 37,318 us
    dge_issue_per_row_ns: float = 1.0    # fit: B2, 128-row DMAs cost 0.613 us each
    dge_default_queues: tuple[str, ...] = ("DGE-SP",)  # fit: where a DMA goes when the kernel does not
    # say (engine=). B1, B2, B4 and B6 each issue one DMA per ~0.5-0.6 us, as one DGE does; with
    # both DGEs they would run 38-45% faster than measured (bench/fidelity.py shows it)
    static_issue_ns: float = 50.0        # assumed: --disable-dge, descriptors prebuilt
    dma_merge_adjacent: bool = True      # inferred from C5 (merge.py): DMAs from one line, each
    # continuing the previous one's rows in HBM and on chip, issue as one

    # --- DMA transfer (sections 2 and 4) ---
    dma_start_latency_ns: float = 1000.0  # documented ~1.3 us semaphore-to-start, split 1.0 + 0.3
    dma_end_latency_ns: float = 300.0
    dma_store_start_latency_ns: float | None = None  # a store's (on chip -> HBM) when it differs from
    # dma_start_latency_ns: NC-v2's profiles measure both (generations.py); None: the same
    dma_engines: int = 16                # per NeuronCore
    dma_engine_bytes_per_ns: float = 23.0  # 23 B/ns each -> 368 GB/s (DMA bandwidth guide)
    dma_descriptor_ns: float = 5.0       # fit: P3, 128 DMAs of 512-byte rows kept the DMA engines ~28 us busy
    dma_run_element_ns: float = 1.03     # fit: conv-a/b fp16's weight DMAs, one element a run in SBUF: a
    # ring takes 647 ns per descriptor of 576 elements (1152 B, 1.12 ns each, less the bytes at 23 B/ns).
    # A run of so few elements costs that much an element, up to dma_descriptor_ns (cost.scheduler.engine_ns)
    dma_min_efficient_bytes: int = 0     # a descriptor moving fewer bytes takes as long as one of
    # this size (the issue's candidate for small fp16 kernels). 0: off. No document gives a size;
    # the given facts do not fix one (docs/cost-model.md, bench/fidelity.py --alternatives)
    dma_row_min_ns: float = 22.8         # fit: conv-a/b fp16's input loads (bench/fidelity.py M5): a
    # partition row of a DMA's on-chip side holds a DMA engine at least this long, whatever its bytes
    # (8-row descriptors of 96 B, 192 B, 2 B and 4 B rows all complete ~183 ns apart); about a
    # 512-byte row's time at 23 B/ns. 0: off (cost.scheduler.engine_ns)
    dma_transpose_efficiency: float = 0.5  # assumed: DMA transpose, SBUF->SBUF up to 50%
    dma_hbm_write_granule_bytes: int = 64  # assumed: an HBM burst; smaller writes are read-modify-write
    dma_hbm_partial_write_ns: float = 99.0  # fit: C3 fp16 32x16, element-granular HBM->HBM weight
    # gathers then DMA transposes cost ~6.5 ns per element over 16 DMA engines (4035 us); the
    # element-granular gather into SBUF (no HBM write) is not slow, so the HBM write pays

    # --- write-after-read / write-after-write hazards (dependencies.hazards) ---
    dma_hazard_granule_bytes: int = 0    # 0: writes conflict element by element. 64 (an HBM burst
    # written read-modify-write) would order stores into one granule; it puts B4 at +36% and C2
    # fp16 at +23% (bench/fidelity.py), so the facts say such writes are not serialised
    dma_hazard_hop_ns: float = 36.6      # assumed: the semaphore hop (no hazard occurs in the profiles)
    onchip_rename_copies: int = 2        # a rewritten on-chip tile is renamed if this many copies fit
    # (trn2-cost-model.md section 1: rewriting a tile does not stall while capacity allows)

    # --- fixed per-kernel overhead (section 4 derivations) ---
    bench_overhead_ns: float = 10_000.0    # nki.benchmark NCL: B5 implies ~10 us
    profile_overhead_ns: float = 15_000.0  # neuron-profile total_time: P1-P3 imply ~15 us

    # --- scheduler (section 5 item 3) ---
    lookahead: int = 64                  # instructions an engine may run ahead into idle gaps

    # --- what a generation has or lacks (nkisim.cost.generations sets them for NC-v2 and NC-v4) ---
    hardware_dge: bool = True            # two DGE instances per core [A3]; NC-v2 has none [A2], so every
    # DMA's descriptors are prebuilt there (the static issue, whatever the compile options)
    shared_ports: tuple[tuple[str, tuple[str, ...], str], ...] = ()  # (port, engines, buffer): engines
    # that may not touch `buffer` at once take turns on the port (NC-v2 [A2]; lifted on NC-v3 [A3])
    act_perf_factor_16bit: int = 1       # NC-v4's Scalar engine streams 256 BF16/FP16/FP8 elements a cycle
    # against 128 others [A4] (its 2x perf mode for tensor_scalar / tensor_copy)
    dve_perf_mode: bool = True           # NC-v3's Vector perf mode (the shared bus with GpSimd) [A3]

    # --- peaks for MFU and roofline (section 6) ---
    pe_rows: int = 128
    pe_cols: int = 128

    @property
    def pe_peak_flops_per_ns(self) -> float:
        """2 x 128 x 128 x 2.4 GHz = 78.6 TFLOPS (bf16/fp16), as neuron-profile's MFU uses."""
        return 2 * self.pe_rows * self.pe_cols * self.pe_ghz

    @property
    def dma_bytes_per_ns(self) -> float:
        return self.dma_engines * self.dma_engine_bytes_per_ns


DEFAULT_PARAMS = CostParams()
