"""The legacy dialect's documented names that nkisim does not simulate (nkisim.facade answers
for them and for names that are not NKI at all)."""
from __future__ import annotations

from ..facade import NotSimulated, make_getattr, no_such_name, public_names  # noqa: F401 (the facade's)

# nki.language's and nki.isa's namespaces by how kernels spell them ("nl.", "nisa."), each put
# here by its module at import: either says where a name that is the other's lives, without
# importing the other (nkisim.nki imports both)
NAMESPACES: dict[str, dict] = {}


def elsewhere(prefix: str):
    """make_getattr's `elsewhere` for the module spelt `prefix`: the other modules' namespaces."""
    return lambda: tuple((other, space) for other, space in NAMESPACES.items() if other != prefix)

# nki.language names documented for SDK 2.26 (shared/docs/nki-api.md 1.2) that nkisim does
# not simulate, each with what a kernel can use instead.
LANGUAGE_NOT_SIMULATED = {
}

# nki.isa instructions documented for SDK 2.26 (nki-api.md 1.3, "Other nisa instructions")
ISA_NOT_SIMULATED = {
    "local_gather": "gather within each partition with nl.gather_flattened, or across partitions with nisa.dma_copy "
                    "(local_gather is not simulated: the reference's prose does not say which source "
                    "elements each output partition receives; only an example shows the layout)",
    "tensor_copy_dynamic_src": "copy with a slice computed in Python from loop indices",
    "tensor_copy_dynamic_dst": "copy with a slice computed in Python from loop indices",
}
