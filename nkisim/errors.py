"""Typed errors, each naming the broken rule, the value that broke it, a remedy and the
kernel author's own file:line. Codes follow the compiler's `err_*` names where one exists."""
from __future__ import annotations

from .source import SourceSite, user_site


class NKISimError(Exception):
    """Base of every error nkisim raises about a kernel."""

    code = "err_nkisim"

    def __init__(self, message: str, *, remedy: str | None = None, code: str | None = None,
                 site: SourceSite | None = None) -> None:
        self.code = code or self.code
        self.detail = message
        self.remedy = remedy
        self.site = site if site is not None else user_site(2)
        super().__init__(self._render())

    def _render(self) -> str:
        text = f"[{self.code}] {self.detail}"
        if self.site is not None:
            text += f"\n  at {self.site}"
        if self.remedy:
            text += f"\n  fix: {self.remedy}"
        return text


class HardwareLimitError(NKISimError, ValueError):
    """A tile or operand exceeds an architectural size limit."""
    code = "err_size_of_dimension_exceed_arch_limit"


class PartitionMismatchError(NKISimError, ValueError):
    code = "err_num_partition_mismatch"


class ShapeError(NKISimError, ValueError):
    """Operand shapes that do not fit together."""
    code = "err_param_shape_mismatch"


class MemorySpaceError(NKISimError, TypeError):
    """An operand lives in a buffer the instruction cannot read or write."""
    code = "err_unsupported_memory"


class OutOfBoundsError(NKISimError, IndexError):
    code = "err_tensor_access_out_of_bound"


class IndexingError(NKISimError, IndexError):
    code = "err_unsupported_tensor_indexing"


class DtypeError(NKISimError, TypeError):
    code = "err_unsupported_dtype"


class AllocationError(NKISimError, MemoryError):
    """On-chip memory (SBUF or PSUM) over capacity, like the backend allocator's GCA035."""
    code = "err_stack_overflow_sbuf"


class DeviceValueError(NKISimError, TypeError):
    """Host Python tried to read the values of a device tensor during tracing."""
    code = "err_device_tensor_value_on_host"


class KernelContractError(NKISimError, ValueError):
    """Kernel inputs, outputs or call conventions are wrong."""
    code = "err_kernel_contract"


class KernelValueError(KernelContractError):
    """A kernel's promise about its own values that they break, found only when its program
    executes (nc_matmul's 0/1 hints): the kernel's fault, though the grader sees it in its
    trusted executor, not in the kernel's process."""

    @classmethod
    def rebuilt(cls, rendered: str) -> "KernelValueError":
        """The error a forked process reported as text (nkisim.split), as it was raised there."""
        err = cls.__new__(cls)
        Exception.__init__(err, rendered)
        err.code, err.detail, err.remedy, err.site = cls.code, rendered, None, None
        return err


class UnsupportedOperationError(NKISimError, ValueError):
    code = "err_instruction_unsupported_op"


class OutsideKernelError(NKISimError, RuntimeError):
    code = "err_nki_api_outside_of_nki_kernel"


class LatencyUnavailableError(NKISimError, NotImplementedError):
    code = "err_latency_unavailable"


class NotSimulatedError(NKISimError, NotImplementedError):
    """Documented NKI that nkisim does not simulate: the kernel may well be valid."""
    code = "err_not_simulated"


class NoSuchNameError(NKISimError, AttributeError):
    """A name that is not part of the NKI API at all (a typo, or a name from another module).
    Also an AttributeError, so hasattr()/getattr(..., default) keep working."""
    code = "err_no_such_nki_name"


class ArgumentError(NKISimError, TypeError):
    """An NKI call whose arguments do not match its signature."""
    code = "err_unsupported_args"


class SimulatorFailure(NKISimError, RuntimeError):
    """An unexpected exception inside the simulator while it served the kernel's call; the
    original exception is kept as __cause__."""
    code = "err_simulator_exception"


class RealNeuronxccPresentError(RuntimeError):
    """nkisim.install() found the real neuronx-cc and refuses to shadow it."""
