"""seqlab: the helper package of the course "from recurrent networks to Transformers".

Importing it has no side effects: it downloads, trains and prints nothing. It imports nothing either (torch comes
with the first module that needs it), so that the standard-library modules (``seqlab.manifest``,
``seqlab.notebook_rules``) load fast wherever the package is installed.
"""

__version__ = "0.1.0"
__all__ = ["get_device", "seed_everything", "__version__"]


def __getattr__(name: str):
    if name in ("get_device", "seed_everything"):
        from seqlab import device
        return getattr(device, name)
    raise AttributeError(f"module 'seqlab' has no attribute {name!r}")
