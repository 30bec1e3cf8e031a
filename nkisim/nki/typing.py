"""`neuronxcc.nki.typing`: annotations only (`nt.tensor[...]`, `nt.mutable_tensor`)."""


class _Annotation:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getitem__(self, item):
        return self

    def __repr__(self) -> str:
        return f"nki.typing.{self._name}"


tensor = _Annotation("tensor")
mutable_tensor = _Annotation("mutable_tensor")
