"""The Porter stemmer of token F1 and BM25: NLTK's (its default mode), without importing the rest of NLTK.

``from nltk.stem import PorterStemmer`` runs ``nltk/__init__.py`` first, which imports every NLTK subpackage
and scipy.stats with them, in every ``train.py`` and ``evaluate.py`` process (the test suite starts ~100); the
stemmer needs three small modules of NLTK, and :func:`_porter_stemmer_class` loads only those. The stems come
from NLTK's own code, so they are the same, and every cached call, pack and table keyed by them stays valid.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from functools import lru_cache
from typing import Any

__all__ = ["porter_stem"]


def _porter_stemmer_class() -> Any:
    """NLTK's ``PorterStemmer`` class, loaded without running ``nltk/__init__.py`` where that is possible.

    Stand-ins for the packages ``nltk`` and ``nltk.stem`` (empty modules whose ``__path__`` is NLTK's own
    directories) let ``nltk.stem.porter`` import its few NLTK dependencies without their packages'
    ``__init__``. Every ``nltk`` module this loads is dropped from ``sys.modules`` again, so a later
    ``import nltk`` anywhere runs NLTK's ``__init__`` as if this had never happened. Where NLTK is already
    imported, or its layout is not the one expected (another version), the plain import is used.
    """
    if "nltk" not in sys.modules:
        spec = importlib.util.find_spec("nltk")  # finds the package without executing it
        if spec is not None and spec.submodule_search_locations:
            before = set(sys.modules)
            try:
                nltk_dirs = list(spec.submodule_search_locations)
                for name, dirs in (("nltk", nltk_dirs), ("nltk.stem", [f"{d}/stem" for d in nltk_dirs])):
                    stand_in = types.ModuleType(name)
                    stand_in.__path__ = dirs
                    sys.modules[name] = stand_in
                return importlib.import_module("nltk.stem.porter").PorterStemmer
            except Exception:  # another NLTK layout: the plain import below still works
                pass
            finally:
                for name in set(sys.modules) - before:
                    if name == "nltk" or name.startswith("nltk."):
                        del sys.modules[name]
    from nltk.stem import PorterStemmer

    return PorterStemmer


# NLTK's PorterStemmer is pure Python and needs no nltk data download.
_PORTER = _porter_stemmer_class()()


@lru_cache(maxsize=200_000)
def porter_stem(word: str) -> str:
    """The Porter stem of one lower-cased ``word`` (NLTK's ``PorterStemmer().stem``), cached."""
    stem: str = _PORTER.stem(word)
    return stem
