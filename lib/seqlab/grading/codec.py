"""How a value crosses from the sandboxed child (the student's code) to the grader: plain data only.

The child :func:`encode` s what the student's function returned into JSON-able tagged lists; the trusted
parent :func:`decode` s them into *new* plain objects — ``None``, ``bool``, ``int``, ``float``, ``str``,
``list``, ``tuple``, ``dict``, ``set``, a plain ``torch.Tensor`` or ``numpy.ndarray`` — and nothing else.
So an object whose ``__eq__`` always says True, a Tensor subclass that overrides ``__torch_function__``, or a
pickle that runs code never reaches the comparison: the parent compares values it built itself.

``encode`` runs in the child and can be bypassed by the student; that is fine, because ``decode`` trusts
nothing it reads: tags, dtypes, shapes and byte lengths are checked, and depth and size are bounded.
"""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np
import torch

MAX_DEPTH = 32
MAX_ITEMS = 2_000_000          # containers' items plus tensor elements, in one value
TENSOR_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)}
ARRAY_DTYPES = {np.dtype(t).str for t in (np.float64, np.float32, np.float16, np.int64, np.int32, np.int16,
                                            np.int8, np.uint8, np.bool_, np.complex64, np.complex128)}


class Unreadable(ValueError):
    """A value the grader cannot take: a type it does not read, or data that does not fit its description."""


def encode(value: Any, depth: int = 0) -> list:
    """``value`` as nested tagged lists that :func:`json.dumps` can write; raises :class:`Unreadable`."""
    if depth > MAX_DEPTH:
        raise Unreadable(f"nested deeper than {MAX_DEPTH} levels")
    kind = type(value)
    if value is None:
        return ["none"]
    if kind is bool:
        return ["bool", value]
    if kind is int:
        return ["int", str(value)]
    if kind is float:
        return ["float", value.hex()]
    if kind is str:
        return ["str", value]
    if isinstance(value, np.generic):                       # numpy's scalars: their Python value
        return encode(value.item(), depth)
    if kind is torch.Size:
        return encode(tuple(value), depth)
    if kind in (list, tuple, set, frozenset):
        items = sorted(value, key=repr) if kind in (set, frozenset) else value
        return [kind.__name__, [encode(v, depth + 1) for v in items]]
    if kind is dict:
        return ["dict", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]]
    if isinstance(value, torch.Tensor):                    # a subclass or a Parameter: its data, as a plain tensor
        plain = torch.Tensor.detach(value).as_subclass(torch.Tensor).to("cpu").contiguous()
        if plain.layout != torch.strided:
            raise Unreadable(f"a {plain.layout} tensor; return a dense one")
        dtype = str(plain.dtype).removeprefix("torch.")
        if dtype not in TENSOR_DTYPES:
            raise Unreadable(f"a tensor of dtype {dtype}")
        raw = plain.view(torch.int16) if plain.dtype == torch.bfloat16 else plain
        return ["tensor", dtype, list(plain.shape), base64.b64encode(raw.numpy().tobytes()).decode()]
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        if array.dtype.str not in ARRAY_DTYPES:
            raise Unreadable(f"an array of dtype {array.dtype}")
        return ["ndarray", array.dtype.str, list(array.shape), base64.b64encode(array.tobytes()).decode()]
    raise Unreadable(f"an object of type {kind.__module__}.{kind.__qualname__}")


def decode(data: Any) -> Any:
    """The value :func:`encode` described, built afresh from plain types; raises :class:`Unreadable`."""
    budget = [MAX_ITEMS]
    return _decode(data, 0, budget)


def _spend(budget: list[int], n: int) -> None:
    budget[0] -= n
    if budget[0] < 0:
        raise Unreadable(f"more than {MAX_ITEMS:,} items")


def _decode(data: Any, depth: int, budget: list[int]) -> Any:
    if depth > MAX_DEPTH:
        raise Unreadable(f"nested deeper than {MAX_DEPTH} levels")
    if type(data) is not list or not data or type(data[0]) is not str:
        raise Unreadable("malformed value")
    tag, rest = data[0], data[1:]
    _spend(budget, 1)
    if tag == "none" and not rest:
        return None
    if tag == "bool" and len(rest) == 1 and type(rest[0]) is bool:
        return rest[0]
    if tag == "int" and len(rest) == 1 and type(rest[0]) is str and len(rest[0]) <= 5000:
        try:
            return int(rest[0])
        except ValueError:
            raise Unreadable("malformed int") from None
    if tag == "float" and len(rest) == 1 and type(rest[0]) is str:
        try:
            return float.fromhex(rest[0]) if rest[0] not in ("nan", "inf", "-inf") else float(rest[0])
        except (ValueError, OverflowError):
            raise Unreadable("malformed float") from None
    if tag == "str" and len(rest) == 1 and type(rest[0]) is str:
        return rest[0]
    if tag in ("list", "tuple", "set", "frozenset") and len(rest) == 1 and type(rest[0]) is list:
        _spend(budget, len(rest[0]))
        items = [_decode(item, depth + 1, budget) for item in rest[0]]
        if tag in ("set", "frozenset"):
            try:
                return set(items) if tag == "set" else frozenset(items)
            except TypeError:
                raise Unreadable("a set of unhashable items") from None
        return items if tag == "list" else tuple(items)
    if tag == "dict" and len(rest) == 1 and type(rest[0]) is list:
        _spend(budget, len(rest[0]))
        out = {}
        for pair in rest[0]:
            if type(pair) is not list or len(pair) != 2:
                raise Unreadable("malformed dict")
            key = _decode(pair[0], depth + 1, budget)
            try:
                out[key] = _decode(pair[1], depth + 1, budget)
            except TypeError:
                raise Unreadable("a dict with an unhashable key") from None
        return out
    if tag in ("tensor", "ndarray") and len(rest) == 3:
        return _decode_array(tag, *rest, budget)
    raise Unreadable(f"malformed value tagged {tag[:20]!r}")


def _decode_array(tag: str, dtype: Any, shape: Any, payload: Any, budget: list[int]) -> Any:
    if (type(shape) is not list or len(shape) > MAX_DEPTH or not all(type(n) is int and n >= 0 for n in shape)
            or type(payload) is not str):
        raise Unreadable(f"malformed {tag}")
    numel = math.prod(shape)
    _spend(budget, numel)
    try:
        raw = base64.b64decode(payload, validate=True)
    except ValueError:
        raise Unreadable(f"malformed {tag} data") from None
    if tag == "ndarray":
        if dtype not in ARRAY_DTYPES:
            raise Unreadable(f"an array of dtype {dtype!r}")
        np_dtype = np.dtype(dtype)
        if len(raw) != numel * np_dtype.itemsize:
            raise Unreadable("array data does not match its shape")
        return np.frombuffer(raw, dtype=np_dtype).reshape(shape).copy()
    if dtype not in TENSOR_DTYPES:
        raise Unreadable(f"a tensor of dtype {dtype!r}")
    torch_dtype = TENSOR_DTYPES[dtype]
    carrier = torch.int16 if torch_dtype == torch.bfloat16 else torch_dtype
    itemsize = torch.empty((), dtype=carrier).element_size()
    if len(raw) != numel * itemsize:
        raise Unreadable("tensor data does not match its shape")
    flat = torch.frombuffer(bytearray(raw), dtype=carrier) if raw else torch.empty(0, dtype=carrier)
    flat = flat.view(torch.bfloat16) if torch_dtype == torch.bfloat16 else flat
    return flat.reshape(shape).clone()
