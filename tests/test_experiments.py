"""seqlab.experiments holds the runs; seqlab.exercises only checks (issue 17: experiments out of the checkers)."""

import importlib
import inspect
import pkgutil

import pytest

import seqlab.exercises
import seqlab.experiments

CHECKERS = [importlib.import_module(f"seqlab.exercises.{m}") for m in seqlab.exercises.NOTEBOOK_MODULES]
EXPERIMENTS = [importlib.import_module(f"seqlab.experiments.{m.name}")
               for m in pkgutil.iter_modules(seqlab.experiments.__path__)]


@pytest.mark.parametrize("module", CHECKERS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_a_checker_neither_trains_nor_draws(module):
    source = inspect.getsource(module)
    for banned in ("seqlab.widgets", "seqlab.train import", "from seqlab import pretrained", "load_pretrained"):
        assert banned not in source, f"{module.__name__} uses {banned}: an experiment belongs in seqlab.experiments"


@pytest.mark.parametrize("module", EXPERIMENTS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_each_experiment_is_cached_and_named_for_its_notebook(module):
    assert module.__doc__.startswith("Notebook "), "an experiment's docstring says which notebook runs it"
    runs = [f for name, f in vars(module).items() if name.startswith(("measure_", "space_")) and callable(f)]
    assert runs and all(hasattr(f, "cache_clear") for f in runs), "each run is cached once per process"
