"""Makes ``import deep_gemm`` (``flash_mla``, ``deep_select``) resolve to tessera's module.

Normally ``deep_gemm.x`` *is* ``tessera.deep_gemm.x`` (same module object). When a test has put its
own package object under the alias name (DeepSelect's interface tests install a fake package and a
fake backend, then import ``deep_select.interface``), tessera's source file is loaded afresh under the
requested name, so its relative imports see the test's fakes, as DeepSeek's own file would.
"""
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

ALIASES = {"deep_gemm": "tessera.deep_gemm", "flash_mla": "tessera.flash_mla",
           "deep_select": "tessera.deep_select"}


class _Existing(importlib.abc.Loader):
    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self.saved_spec = module.__spec__  # the import system overwrites it with the alias spec
        return module

    def exec_module(self, module):
        module.__spec__ = self.saved_spec


class AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        root, _, rest = name.partition(".")
        if root not in ALIASES:
            return None
        real = ALIASES[root] + ("." + rest if rest else "")
        ours = importlib.import_module(ALIASES[root])
        parent = sys.modules.get(root)
        if rest and parent is not None and parent is not ours:
            # A package the test built itself: load our file under its name.
            spec = importlib.util.find_spec(real)
            if spec is None or spec.origin is None:
                return None
            return importlib.util.spec_from_file_location(name, spec.origin,
                                                          submodule_search_locations=spec.submodule_search_locations)
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.machinery.ModuleSpec(name, _Existing(real), is_package=True)


def install():
    sys.meta_path.insert(0, AliasFinder())
