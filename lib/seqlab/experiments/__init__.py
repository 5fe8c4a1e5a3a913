"""The notebooks' experiments, one module each, each run cached once per process."""
