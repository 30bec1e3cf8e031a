"""Every exception the simulator raises on a kernel's behalf names the kernel's own file and
line: calls that do not fit an instruction's signature, and exceptions from inside the
simulator, become typed NKISimErrors at the calling line with the original kept as cause;
typed errors and warnings pass through unchanged."""
import os

import numpy as np
import pytest

import nkisim
from marker_lines import marker_lines
from nkisim import errors
from nkisim.registry import kernel_facing

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

THIS_FILE = os.path.abspath(__file__)
line_of = marker_lines(THIS_FILE)



def raised_at(exc_type, code, tag, kernel, *args):
    with pytest.raises(exc_type) as info:
        nki.baremetal(kernel)(*args)
    err = info.value
    assert err.code == code, str(err)
    assert err.remedy and len(err.remedy) > 10, str(err)
    assert err.site is not None and os.path.abspath(err.site.filename) == THIS_FILE, str(err)
    assert err.site.lineno == line_of(tag), f"{err.site} is not the line of <{tag}>"
    assert f"{os.path.basename(THIS_FILE)}:{line_of(tag)}" in str(err)
    return err


def x128():
    return np.arange(128 * 4, dtype=np.float32).reshape(128, 4)


def matmul_missing_operand(x):
    out = nl.ndarray((4, 4), nl.float32, buffer=nl.hbm)
    tile = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    product = nisa.nc_matmul(tile)  # <matmul-arity>
    nisa.dma_copy(dst=out, src=nisa.tensor_copy(product))
    return out


def ndarray_without_shape(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    tile = nl.ndarray(dtype=x.dtype, buffer=nl.sbuf)  # <ndarray-arity>
    nisa.dma_copy(dst=out, src=tile)
    return out


def reduce_over_a_float_axis(x):
    out = nl.ndarray((128, 1), x.dtype, buffer=nl.hbm)
    tile = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    total = nisa.tensor_reduce(np.add, tile, axis=1.5, keepdims=True)  # <reduce-float-axis>
    nisa.dma_copy(dst=out, src=total)
    return out


def loop_with_a_fractional_trip_count(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm)
    tile = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    for i in nl.affine_range(x.shape[1] / 3):  # <fractional-range>
        nisa.dma_copy(dst=out, src=tile)
    return out


def test_a_call_that_does_not_fit_the_signature_names_the_line_and_the_signature():
    err = raised_at(errors.ArgumentError, "err_unsupported_args", "matmul-arity", matmul_missing_operand, x128())
    assert "nisa.nc_matmul" in err.detail and "moving" in err.detail
    assert "nisa.nc_matmul(stationary, moving" in err.remedy
    assert isinstance(err.__cause__, TypeError) and isinstance(err, TypeError)
    err = raised_at(errors.ArgumentError, "err_unsupported_args", "ndarray-arity", ndarray_without_shape, x128())
    assert "nl.ndarray" in err.detail and "'shape'" in err.detail


def test_an_exception_inside_an_instruction_becomes_a_typed_error_at_the_line():
    err = raised_at(errors.SimulatorFailure, "err_simulator_exception", "reduce-float-axis",
                    reduce_over_a_float_axis, x128())
    assert "nisa.tensor_reduce raised TypeError" in err.detail
    assert isinstance(err.__cause__, TypeError)
    assert "nisa.tensor_reduce(op, data, axis" in err.remedy


def test_an_exception_inside_a_language_function_becomes_a_typed_error_at_the_line():
    err = raised_at(errors.SimulatorFailure, "err_simulator_exception", "fractional-range",
                    loop_with_a_fractional_trip_count, x128())
    assert "nl.affine_range" in err.detail and isinstance(err.__cause__, TypeError)


def test_typed_errors_and_warnings_pass_through_unchanged():
    def raises_typed():
        raise errors.ShapeError("typed already", remedy="nothing to add")

    def warns():
        raise UserWarning("a warning escalated by -W error")

    with pytest.raises(errors.ShapeError) as info:
        kernel_facing(raises_typed, "nl.example")()
    assert info.value.__cause__ is None and info.value.detail == "typed already"
    with pytest.raises(UserWarning):
        kernel_facing(warns, "nl.example")()


@nki.jit
def output_never_written(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    return out  # <never-written>


@nki.jit
def returns_an_sbuf_tile(a):
    tile = nl.load(a)
    return tile  # <returns-sbuf>


def test_output_contract_errors_found_after_tracing_point_at_the_kernels_return():
    """Found once the kernel's Python has returned, yet reported at its return line, not at the
    grader or simulator code that looked."""
    a = np.ones((4, 8), np.float32)
    raised_at(errors.KernelContractError, "err_tensor_output_not_written_to", "never-written", output_never_written, a)
    raised_at(errors.KernelContractError, "err_kernel_contract", "returns-sbuf", returns_an_sbuf_tile, a)
