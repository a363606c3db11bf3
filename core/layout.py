"""How a model is split over devices: data x tensor x pipeline parallel."""

from __future__ import annotations

from typing import NamedTuple


class Layout(NamedTuple):
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int

    @property
    def devices(self) -> int:
        return self.data_parallel * self.tensor_parallel * self.pipeline_parallel
