"""seqlab: the helper package of the course "from recurrent networks to Transformers".

Importing it has no side effects: it downloads, trains and prints nothing.
"""

from seqlab.device import get_device, seed_everything

__version__ = "0.1.0"
__all__ = ["get_device", "seed_everything", "__version__"]
