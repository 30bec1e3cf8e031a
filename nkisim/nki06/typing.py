"""`nki.typing` of NKI 0.6 (nt): annotations only, `nt.tensor[128, 512]`; nothing is checked
at run time."""


class _Annotation:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getitem__(self, item):
        return self

    def __repr__(self) -> str:
        return f"nki.typing.{self._name}"


tensor = _Annotation("tensor")
mutable_tensor = _Annotation("mutable_tensor")
