"""Automatic feedback for the notebooks' exercises: ``check(name, your_function)``.

The machinery is in :mod:`seqlab.exercises._core`. Each notebook's exercises live in a module of
their own, ``nbNN_topic.py`` (``nb01_sequences``, ``nb04_lstm``, ...); every such module is
imported here, which registers its exercises. ``exercises_of("04")`` lists one notebook's.
"""

import importlib
import pkgutil

from seqlab import manifest
from seqlab.exercises._core import (EXERCISES, REGISTERED_BY, Case, CheckResult, Exercise, Measured, Plugged, Verdict, catalogue,
                                   check, expected_value, judge, measurement_args, notebook_number, plug_in, register, yours)

NOTEBOOK_MODULES = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("nb"))
for _module in NOTEBOOK_MODULES:
    importlib.import_module(f"{__name__}.{_module}")


def exercises_of(notebook: str | int) -> dict[str, Exercise]:
    """One notebook's exercises, in registration order: ``exercises_of(4)``, ``("04")``, ``("04-lstm")``,
    ``("nb04")`` or ``("nb04_lstm")`` (the course manifest's names, or its module's). The registry, not the
    notebook, says which exercises there are; :func:`seqlab.exercises.layout.in_notebook_order` orders them."""
    text = str(notebook)
    number = manifest.notebook(text.split("_")[0] if text.startswith("nb") else text).number
    return {name: ex for name, ex in EXERCISES.items() if notebook_number(name) == number}


__all__ = ["EXERCISES", "NOTEBOOK_MODULES", "Case", "CheckResult", "Exercise", "Measured", "Plugged", "Verdict", "catalogue", "check",
           "exercises_of", "expected_value", "judge", "measurement_args", "plug_in", "register", "yours"]
