"""Seeded generators for the synthetic tasks (dates, copy, reversal, the adding problem); the same seed
gives the same data on every machine."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# Each format renders a date; month and weekday names are spelled here rather than taken from
# the C locale, so the data is the same on every machine. Numeric formats are unambiguous by
# their separator: '/' is month-first (US), '.' is day-first (European), '-' is year-first.
DATE_FORMATS: dict[str, Callable[[dt.date], str]] = {
    "3 May 1998": lambda d: f"{d.day} {MONTHS[d.month - 1]} {d.year}",
    "May 3, 1998": lambda d: f"{MONTHS[d.month - 1]} {d.day}, {d.year}",
    "Sunday, 3 May 1998": lambda d: f"{WEEKDAYS[d.weekday()]}, {d.day} {MONTHS[d.month - 1]} {d.year}",
    "Sunday, May 3, 1998": lambda d: f"{WEEKDAYS[d.weekday()]}, {MONTHS[d.month - 1]} {d.day}, {d.year}",
    "3 may 1998": lambda d: f"{d.day} {MONTHS[d.month - 1].lower()} {d.year}",
    "3 May 98": lambda d: f"{d.day} {MONTHS[d.month - 1][:3]} {d.year % 100:02d}",
    "May 03 1998": lambda d: f"{MONTHS[d.month - 1][:3]} {d.day:02d} {d.year}",
    "03.05.1998": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",
    "05/03/1998": lambda d: f"{d.month:02d}/{d.day:02d}/{d.year}",
    "3.5.98": lambda d: f"{d.day}.{d.month}.{d.year % 100:02d}",
    "1998-5-3": lambda d: f"{d.year}-{d.month}-{d.day}",
    "the 3rd of May 1998": lambda d: f"the {d.day}{_ordinal_suffix(d.day)} of {MONTHS[d.month - 1]} {d.year}",
}

# Two-digit years are read with a pivot: 50-99 -> 1950-1999, 00-49 -> 2000-2049. Dates are drawn
# from that century so the two-digit formats stay unambiguous.
DATE_RANGE = (dt.date(1950, 1, 1), dt.date(2049, 12, 31))


def _ordinal_suffix(day: int) -> str:
    if 11 <= day % 100 <= 13:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


@dataclass(frozen=True)
class DatePair:
    source: str  # e.g. "Sunday, 3 May 1998"
    target: str  # ISO 8601, e.g. "1998-05-03"
    format: str  # the key of DATE_FORMATS that produced source


def make_dates(n: int, *, seed: int = 0, formats: Sequence[str] | None = None) -> list[DatePair]:
    """``n`` random dates in ``DATE_RANGE``, each rendered in a random format of ``formats``."""
    names = list(DATE_FORMATS) if formats is None else list(formats)
    unknown = [f for f in names if f not in DATE_FORMATS]
    if unknown:
        raise ValueError(f"unknown date format(s) {unknown}; expected some of {list(DATE_FORMATS)}")
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    rng = random.Random(seed)
    first, last = (d.toordinal() for d in DATE_RANGE)
    pairs = []
    for _ in range(n):
        date = dt.date.fromordinal(rng.randint(first, last))
        fmt = rng.choice(names)
        pairs.append(DatePair(DATE_FORMATS[fmt](date), date.isoformat(), fmt))
    return pairs


def _random_tokens(n: int, length: int, vocab_size: int, seed: int, reserved: int) -> torch.Tensor:
    if n < 1 or length < 1:
        raise ValueError(f"n and length must be at least 1, got n={n}, length={length}")
    if vocab_size <= reserved:
        raise ValueError(f"vocab_size must exceed the {reserved} reserved ids, got {vocab_size}")
    g = torch.Generator().manual_seed(seed)
    return torch.randint(reserved, vocab_size, (n, length), generator=g)


def copy_task(n: int, length: int, vocab_size: int = 10, *, seed: int = 0, reserved: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token sequences and themselves: ``(source, target)``, each (n, length); ids ``>= reserved``."""
    source = _random_tokens(n, length, vocab_size, seed, reserved)
    return source, source.clone()


def reverse_task(n: int, length: int, vocab_size: int = 10, *, seed: int = 0, reserved: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token sequences and their reverses: ``(source, target)``, each (n, length)."""
    source = _random_tokens(n, length, vocab_size, seed, reserved)
    return source, source.flip(1)


def make_reversals(n: int, *, min_len: int = 2, max_len: int = 24, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` random digit strings (lengths ``min_len..max_len``) with their reverses: ``("8312", "2138")``."""
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(min_len, max_len)))
        pairs.append((digits, digits[::-1]))
    return pairs


def adding_problem(n: int, length: int, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The adding problem (Le, Jaitly & Hinton, 2015): ``x`` (n, length, 2) holds a value in [0, 1) and a marker
    (1 at one step per half); ``y`` (n,) is the sum of the two marked values. Predicting 1.0 has MSE 1/6.
    """
    if length < 2:
        raise ValueError(f"length must be at least 2 (one marker in each half), got {length}")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    g = torch.Generator().manual_seed(seed)
    values = torch.rand(n, length, generator=g)
    half = length // 2
    first = torch.randint(0, half, (n,), generator=g)
    second = torch.randint(half, length, (n,), generator=g)
    markers = torch.zeros(n, length)
    rows = torch.arange(n)
    markers[rows, first] = 1.0
    markers[rows, second] = 1.0
    x = torch.stack([values, markers], dim=-1)
    y = values[rows, first] + values[rows, second]
    return x, y
