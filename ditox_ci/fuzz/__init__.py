"""Pattern-directed model generation: per-pass generators, the fuzz corpus, and its replay data.

Importing this package registers every generator family in GENERATORS.
"""

import importlib

from ditox_ci.fuzz.base import GENERATORS, GeneratedModel, Generator, generate, register
from ditox_ci.fuzz.corpus import generate_within, write_corpus

# the generator modules, one family each: importing one registers its generators
FAMILIES = (
    "chains",
    "fusions",
    "graphs",
    "ir_passes",
    "nops",
    "ort_fusions",
    "ort_rules",
    "quantized",
    "rewrites",
    "shapes",
    "sim",
    "slim",
    "stages",
    "transformers",
)
for _family in FAMILIES:
    importlib.import_module(f"ditox_ci.fuzz.{_family}")

__all__ = ["FAMILIES", "GENERATORS", "GeneratedModel", "Generator", "generate", "generate_within",
           "register", "write_corpus"]
