"""A bounded LRU of KV block hashes: vLLM's automatic prefix cache, by block (size 16 by default)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class PrefixCache:
    __slots__ = ("_blocks", "capacity")

    def __init__(self, capacity: int) -> None:
        self.capacity = max(0, capacity)
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def match(self, hashes: Sequence[int], start: int = 0) -> int:
        """How many blocks from `start` on are cached, as a run (a chained prefix); touches them."""
        matched = 0
        for block in hashes[start:]:
            if block not in self._blocks:
                break
            self._blocks.move_to_end(block)
            matched += 1
        return matched

    def insert(self, hashes: Sequence[int]) -> None:
        if self.capacity == 0:
            return
        for block in hashes:
            if block in self._blocks:
                self._blocks.move_to_end(block)
            else:
                self._blocks[block] = None
        while len(self._blocks) > self.capacity:
            self._blocks.popitem(last=False)

    def clear(self) -> None:
        self._blocks.clear()
