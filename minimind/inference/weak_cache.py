"""What the engine makes for objects it does not own (a model's engine and prepared weights, a
tokenizer's UTF-8 guards), kept beside them in a weak map rather than as attributes set on them:
a copied or pickled model or tokenizer carries none of it, no class we did not write grows a
field, and an entry goes when its object goes (a value must not refer to its object, or the
object would live for ever)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class WeakCache(Generic[V]):
    """One value per live object, made on first use; thread-safe (the page and the API ask for
    a model's engine from many threads at once, and two engines would mean two decode threads)."""

    def __init__(self):
        self._values: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.RLock()  # re-entrant: one value's make() may ask another cache

    def get(self, owner, make: Callable[[], V], fresh: Callable[[V], bool] | None = None) -> V:
        """`owner`'s value: the kept one while `fresh(value)` holds (always, without `fresh`), else
        `make()`, kept from then on."""
        with self._lock:
            value = self._values.get(owner)
            if value is None or (fresh is not None and not fresh(value)):
                value = self._values[owner] = make()
            return value
