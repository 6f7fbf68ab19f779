"""The flat arrays the numba kernels read: KernelModel holds an assembled model in two flat arrays,
``mi`` (int64) and ``mf`` (float64), laid out by hil.kernels.layout; Work holds every scratch buffer
of the kernels in one flat array ``w``, so a step allocates nothing and crosses into numba with three
arrays. Python reads and writes the named blocks through views (``km.view("jpar")`` or ``km.jpar``),
which the drives and fault effects change in place while the kernels run.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from hil.kernels import layout as lay_

__all__ = ["KernelModel", "Work", "make_work"]


class _Blocks:
    """Named views into flat arrays (the blocks of hil.kernels.layout)."""

    def __init__(self, views: dict[str, np.ndarray]):
        self._views = views

    def view(self, name: str) -> np.ndarray:
        """The block `name` as a numpy view of its flat array (writes reach the kernels)."""
        try:
            return self._views[name]
        except KeyError:
            raise KeyError(f"no kernel array {name!r}; arrays: {', '.join(self._views)}") from None

    def __getattr__(self, name: str) -> np.ndarray:
        if not name.startswith("_"):        # not before __init__ has run (copy, pickle)
            views = self._views
            if name in views:
                return views[name]
        raise AttributeError(name)

    def arrays(self) -> dict[str, np.ndarray]:
        """Every block, name -> view."""
        return dict(self._views)


def _views(arrays: dict[str, np.ndarray], where: dict) -> dict[str, np.ndarray]:
    out = {}
    for name, (array, at, shape) in where.items():
        if array in arrays:
            n = math.prod(shape)
            out[name] = arrays[array][at:at + n].reshape(shape)
    return out


class KernelModel(_Blocks):
    """An assembled model as the kernels read it: ``mi`` (sizes, block offsets, integer blocks) and
    ``mf`` (float blocks); every kernel takes ``(km.mi, km.mf, work.w, ...)``."""

    def __init__(self, sizes: lay_.Sizes, blocks: dict[str, np.ndarray]):
        self.sizes = sizes
        self.where, self.lengths = lay_.offsets(sizes)
        self.mi = np.zeros(self.lengths["mi"], np.int64)
        self.mf = np.zeros(self.lengths["mf"])
        self.mi[:lay_.N_DIMS] = sizes
        for name, (array, at, shape) in self.where.items():
            self.mi[lay_.slot(name)] = at
        super().__init__(_views({"mi": self.mi, "mf": self.mf}, self.where))
        for name, view in self._views.items():
            value = np.asarray(blocks[name])
            if value.shape != view.shape:
                raise ValueError(f"kernel array {name}: shape {value.shape}, the layout expects {view.shape}")
            view[...] = value

    def copy(self) -> KernelModel:
        """An independent copy (its own mi and mf)."""
        return KernelModel(self.sizes, self._views)

    @property
    def dims(self) -> np.ndarray:
        """The sizes (hil.kernels.layout DIM_*), a view of the header of mi."""
        return self.mi[:lay_.N_DIMS]


class Work(_Blocks):
    """Every scratch buffer of the kernels for one model, in one flat array ``w`` (named views too, made
    when first asked for: most users pass only ``w`` to the kernels)."""

    def __init__(self, km: KernelModel):
        self.w = np.zeros(km.lengths["w"])
        self._where = km.where

    @functools.cached_property
    def _views(self) -> dict[str, np.ndarray]:
        return _views({"w": self.w}, self._where)


def make_work(km: KernelModel) -> Work:
    """All scratch buffers of the kernels for this model."""
    return Work(km)
