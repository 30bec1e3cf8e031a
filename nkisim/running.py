"""The machine of the kernel run in progress, found through one ContextVar.

There is no module-level machine: nkisim.machine.Machine.activate sets this variable for the
run, so runs in different threads or contexts never see each other. It lives down here, in
the machine model, because tensors (`t[...] = x`, `acc += y`), the instruction wrapper
(nkisim.registry) and the platform rules all read it, and none of them may import the tracing
Machine above them. The variable holds the Machine object; nothing here knows its class.
"""
from __future__ import annotations

import contextvars

from .errors import OutsideKernelError

RUNNING: contextvars.ContextVar = contextvars.ContextVar("nkisim_machine", default=None)


def current_machine():
    """The running machine; outside a kernel, the error NKI gives for an API call there."""
    machine = RUNNING.get()
    if machine is None:
        raise OutsideKernelError(
            "calling NKI API outside of NKI kernels is not supported",
            remedy="run the kernel through nki.baremetal(kernel)(...), nki.simulate_kernel(kernel, ...) "
                   "or nki.benchmark(...)(kernel)(...)")
    return machine
