"""What tracing caches to keep its per-instruction cost down gives what it gave uncached."""
import itertools

import numpy as np

from nkisim import dtypes
from nkisim.source import SourceSite, user_site


def test_promotion_cached_per_dtype_object_keeps_tf32_apart_from_float32():
    kinds = [dtypes.float32, dtypes.tfloat32, dtypes.bfloat16, dtypes.float16, dtypes.int32, dtypes.uint8,
             np.dtype(bool), dtypes.int16, dtypes.float8_e4m3]
    for a, b in itertools.product(kinds, repeat=2):          # float32 pairs are cached before tf32's
        first, again = dtypes.promote(a, b), dtypes.promote(a, b)
        assert first is again
        assert first == dtypes._promote(a, b) and dtypes.is_tf32(first) == dtypes.is_tf32(dtypes._promote(a, b))
    # tf32 equals float32 as a NumPy dtype (metadata is ignored), yet promotes on its own rule
    assert dtypes.tfloat32 == dtypes.float32 and dtypes.is_tf32(dtypes.tfloat32)
    assert dtypes.promote(dtypes.tfloat32, dtypes.bfloat16) == dtypes._promote(dtypes.tfloat32, dtypes.bfloat16)


def _site_here():
    return user_site(2)        # the line that called this


def test_a_line_has_one_source_site_equal_to_a_fresh_one():
    sites = [_site_here() for _ in range(3)]                 # the same line three times
    other = _site_here()
    assert sites[0] is sites[1] is sites[2]
    assert sites[0] == SourceSite(sites[0].filename, sites[0].lineno)
    assert other != sites[0] and other.lineno == sites[0].lineno + 1


def _traced_sites(source: str, name: str, settrace: bool = False):
    """Trace kernel `name` from `source` (a file of its own); (opcode, line) of every record."""
    import sys
    import types

    import nkisim
    from nkisim.runtime import ArgSpec, trace_kernel
    nkisim.install()
    module = types.ModuleType("generated_kernel")
    module.__file__ = "/generated/kernel_for_sites.py"
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    tracer = (lambda frame, event, arg: tracer) if settrace else None
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        program, _ = trace_kernel(getattr(module, name), [ArgSpec((128, 4), np.float32)], {})
    finally:
        sys.settrace(previous)
    assert all(r.site.filename == module.__file__ for r in program.records)
    return [(r.opcode, r.site.lineno) for r in program.records]


_LONG_KERNEL = """\
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


def long_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
""" + "    filler = 1\n" * 300 + """\
    for i in range(3):
        y = nisa.tensor_tensor(x, x, op=nl.add); z = nisa.tensor_copy(y)
        w = nisa.tensor_tensor(
            z,
            x, op=nl.multiply)
        if i == 1:
            w = nisa.tensor_copy(w)
    nisa.dma_copy(dst=out, src=w)
    return out
"""


def test_sites_found_from_the_call_offset_are_the_lines_a_tracer_sees():
    # two instructions on one line, a call spread over three lines, one line run once of three,
    # past line 300 of the file: the cached (code, offset) -> line answers as f_lineno does
    sites = _traced_sites(_LONG_KERNEL, "long_kernel")
    first = 8 + 300 + 2                                   # the line of `y = ...; z = ...`
    loop = [("tensor_tensor", first), ("tensor_copy", first), ("tensor_tensor", first + 1)]
    assert sites == ([("dma_copy", 8)] + loop + loop + [("tensor_copy", first + 5)] + loop
                     + [("dma_copy", first + 6)])
    assert _traced_sites(_LONG_KERNEL, "long_kernel", settrace=True) == sites
    assert _traced_sites(_LONG_KERNEL, "long_kernel") == sites      # cached entries from before the tracer


def test_the_allocation_table_is_every_row_as_an_allocinfo_in_order():
    import nkisim
    from nkisim.runtime import ArgSpec, trace_kernel
    from nkisim.trace import AllocInfo
    nkisim.install()
    from reference_kernels import conv2d_optimized
    program, machine = trace_kernel(conv2d_optimized.fused_conv2d_maxpool,
                                    [ArgSpec((1, 128, 8, 8), np.float32), ArgSpec((128, 128, 3, 3), np.float32),
                                     ArgSpec((128,), np.float32)], {"pool_size": 2})
    rows = machine._alloc_rows
    assert len(rows) > 30 and all(type(info) is AllocInfo for info in program.allocs)
    assert program.allocs == [AllocInfo._make(row) for row in rows]
    assert [info.id for info in program.allocs] == sorted({row[0] for row in rows})      # increasing, each once
    assert machine.allocations == {info.id: info for info in program.allocs}


def test_every_self_promoting_dtype_promotes_to_itself():
    # tensor_tensor skips promote() for two tiles of one dtype in dtypes.SELF_PROMOTING
    listed = [d for d in dtypes.SUPPORTED if id(d) in dtypes.SELF_PROMOTING]
    assert len(listed) == len(dtypes.SELF_PROMOTING) == len(dtypes.SUPPORTED) - 1
    for d in listed:
        assert dtypes.promote(d, d) is d and dtypes._promote(d, d) is d
    assert id(dtypes.tfloat32) not in dtypes.SELF_PROMOTING and id(np.dtype(bool)) not in dtypes.SELF_PROMOTING
