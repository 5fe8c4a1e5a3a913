"""The notebooks' experiments: runs that train or measure a model, shown in a notebook and judged by
its "predict, then measure" exercise (:mod:`seqlab.exercises`), which only checks.

One module per experiment, named for what it measures; each run is cached once per process, so the
notebook and the checker read the very same models and numbers. Importing this package runs nothing.
"""
