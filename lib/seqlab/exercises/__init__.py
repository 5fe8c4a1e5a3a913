"""Automatic feedback for the notebooks' exercises: ``check(name, your_function)``.

The machinery is in :mod:`seqlab.exercises._core`. Each notebook's exercises live in a module of
their own, ``nbNN_topic.py`` (``nb01_sequences``, ``nb04_lstm``, ...); every such module is
imported here, which registers its exercises. ``exercises_of("nb04")`` lists one notebook's.
"""

import importlib
import pkgutil

from seqlab.exercises._core import (EXERCISES, REGISTERED_BY, Case, CheckResult, Exercise, Measured, Plugged, Verdict, check,
                                   expected_value, judge, measurement_args, plug_in, register, yours)

NOTEBOOK_MODULES = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("nb"))
for _module in NOTEBOOK_MODULES:
    importlib.import_module(f"{__name__}.{_module}")


def exercises_of(notebook: str) -> dict[str, Exercise]:
    """The exercises whose reference solution is defined in one notebook's module, e.g. ``exercises_of("nb01")``."""
    prefix = f"{__name__}.{notebook}"
    return {name: ex for name, ex in EXERCISES.items() if REGISTERED_BY[name].startswith(prefix)}


__all__ = ["EXERCISES", "NOTEBOOK_MODULES", "Case", "CheckResult", "Exercise", "Measured", "Plugged", "Verdict", "check",
           "exercises_of", "expected_value", "judge", "measurement_args", "plug_in", "register", "yours"]
