"""A second device on the CPU, for tests that check where model inputs live.

Tensors "on the fake device" hold CPU data but report ``device('meta')``; inside
:class:`FakeDevice` every op that mixes them with CPU tensors (other than 0-dim ones, which
CUDA accepts too) raises :class:`DeviceMismatch`, as a GPU would. ``.to('meta')``,
``device='meta'`` factories and ``torch.tensor(..., device='meta')`` make fake-device tensors
with their data, so a model moved there really runs and its outputs can be compared with
the CPU's. Needed because a machine without a GPU cannot otherwise show that an input left
on the CPU would fail on CUDA.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

FAKE = torch.device("meta")
_CPU = torch.device("cpu")


class DeviceMismatch(RuntimeError):
    pass


class OnFake(torch.Tensor):
    elem: torch.Tensor

    @staticmethod
    def __new__(cls, elem: torch.Tensor) -> OnFake:
        r = torch.Tensor._make_wrapper_subclass(
            cls, elem.shape, strides=elem.stride(), storage_offset=elem.storage_offset(),
            dtype=elem.dtype, device=FAKE, requires_grad=elem.requires_grad)
        r.elem = elem
        return r

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    def __repr__(self) -> str:  # type: ignore[override]
        return f"OnFake({self.elem!r})"

    # torch's stub declares Tensor.__torch_dispatch__ as a plain function attribute (so an
    # instance method without func); torch calls it as this classmethod, as its docs show.
    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (),  # type: ignore[override]
                           kwargs: Any = None) -> Any:
        return _dispatch(func, args, kwargs or {})


def _is_fake(device: Any) -> bool:
    return device is not None and torch.device(device).type == FAKE.type


def _writes_self(func: Any) -> bool:
    schema_args = func._schema.arguments
    info = schema_args[0].alias_info if schema_args else None
    return info is not None and bool(info.is_write)


def _dispatch(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    fake, host = [False], [False]

    def unwrap(x: Any) -> Any:
        if isinstance(x, OnFake):
            fake[0] = True
            return x.elem
        if isinstance(x, torch.Tensor) and x.dim() > 0:
            host[0] = True
        return x

    name = func.overloadpacket.__name__
    if name == "_has_compatible_shallow_copy_type":
        # no: Module.to then makes new Parameters of fake-device tensors rather than setting
        # .data of CPU ones
        return isinstance(args[0], OnFake) == isinstance(args[1], OnFake)
    uargs, ukw = tree_map(unwrap, args), tree_map(unwrap, kwargs)
    if name in ("_to_copy", "to"):
        return _move(func, args, uargs, ukw, fake[0])
    if _is_fake(ukw.get("device")):
        ukw["device"] = _CPU
        fake[0] = True
    if fake[0] and host[0] and name != "copy_":  # copy_ crosses devices on a GPU too
        raise DeviceMismatch(f"{func}: a CPU tensor given together with tensors on the "
                             "model's device")
    out = func(*uargs, **ukw)
    if not fake[0]:
        return out
    if _writes_self(func) and args and isinstance(args[0], OnFake):
        return args[0]
    return tree_map(lambda x: OnFake(x) if isinstance(x, torch.Tensor) else x, out)


def _move(func: Any, args: Any, uargs: Any, ukw: dict[str, Any], from_fake: bool) -> Any:
    target = None  # None: the tensor stays where it is (a dtype-only .to)
    rest = list(uargs[1:])
    for i, a in enumerate(rest):
        if isinstance(a, (torch.device, str)):
            target, rest[i] = torch.device(a), _CPU
        elif isinstance(a, torch.Tensor):  # .to(other)
            target = FAKE if isinstance(args[1 + i], OnFake) else _CPU
    if ukw.get("device") is not None:
        target, ukw["device"] = torch.device(ukw["device"]), _CPU
    out = func(uargs[0], *rest, **ukw)
    on_fake = from_fake if target is None else target.type == FAKE.type
    return OnFake(out) if on_fake else out


class FakeDevice(TorchDispatchMode):
    """Inside: ``model.to(FAKE)`` puts a model on the fake device (see the module)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        return _dispatch(func, args, kwargs or {})

    def __enter__(self) -> FakeDevice:
        # torch.tensor(data, device=...) builds its tensor below the dispatcher's modes
        self._saved = torch.tensor, torch.as_tensor, torch.inference_mode
        # forwarded as called: positional arguments and keywords other than device
        real_tensor: Callable[..., torch.Tensor] = torch.tensor
        real_as_tensor: Callable[..., torch.Tensor] = torch.as_tensor

        def tensor(data: Any, *a: Any, device: Any = None, **kw: Any) -> torch.Tensor:
            if _is_fake(device):
                return OnFake(real_tensor(data, *a, device=_CPU, **kw))
            return real_tensor(data, *a, device=device, **kw)

        def as_tensor(data: Any, *a: Any, device: Any = None, **kw: Any) -> torch.Tensor:
            if _is_fake(device):
                return OnFake(real_as_tensor(data, *a, device=_CPU, **kw))
            return real_as_tensor(data, *a, device=device, **kw)

        def no_grad_mode(mode: bool = True) -> torch.no_grad:
            return torch.no_grad()

        torch.tensor, torch.as_tensor = tensor, as_tensor
        # inference mode refuses views of wrapper tensors made outside it (weights, inputs
        # moved before the forward); no_grad computes the same values
        torch.inference_mode = no_grad_mode  # type: ignore[assignment,misc]
        super().__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        torch.tensor, torch.as_tensor, torch.inference_mode = self._saved  # type: ignore[misc]
        super().__exit__(*exc)
