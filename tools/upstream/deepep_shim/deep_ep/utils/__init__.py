"""DeepEP's test helpers: envs and testing are the CPU versions next to this file; the other modules
(math, refs, gate) come unchanged from the DeepEP checkout named by TESSERA_DEEPEP_CHECKOUT."""
import os

_checkout = os.environ.get("TESSERA_DEEPEP_CHECKOUT")
if _checkout:
    __path__.append(os.path.join(_checkout, "deep_ep", "utils"))
