"""Measurements a notebook hands to a "predict, then measure" checker.

Some predictions are judged against an experiment too slow to rerun inside ``check`` (a training
run). The notebook runs it once and records the result; the exercise's reference solution reads it
back. Until the measurement exists, the reference raises an error that names the cell to run.
"""

from __future__ import annotations

from typing import Any


class Measurement:
    """One named measurement, recorded by a notebook cell and read by a checker."""

    def __init__(self, name: str, where: str):
        self.name, self.where = name, where     # what is measured; which notebook cell measures it
        self._value: Any = None

    def record(self, value: Any) -> Any:
        """Keep ``value`` (the notebook's measurement) for the checker; returns it."""
        if value is None:
            raise ValueError(f"{self.name}: record a measured value, got None")
        self._value = value
        return value

    def get(self) -> Any:
        if self._value is None:
            raise RuntimeError(f"{self.name} has not been measured in this session yet: run {self.where} first, "
                               "then check your prediction")
        return self._value
