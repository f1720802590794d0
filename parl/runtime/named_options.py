"""Options of a placement registered with option names, the form before options types (deprecated).

    kind = named_options_type("mine", ("workers",))     # what registry.register(..., options=("workers",)) makes
    options = kind(workers=4)
    options.get("workers"), dict(options)                # 4, {"workers": 4}: the options set, as a mapping

Such a placement's runner reads ``context.options`` as the mapping it read before; each registered
placement gets a type of its own, so that its options find its entry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Iterator, Optional, Tuple, cast


class NamedOptions(Mapping):
    """A frozen dataclass of option names (None by default) that reads as a mapping of the options set."""

    def __getitem__(self, key: str) -> object:
        value = getattr(self, key, None) if key in self._names() else None
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._names() if getattr(self, name) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def _names(self) -> Tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cast(Any, self)))  # a dataclass: the subclass made below


def named_options_type(placement: str, option_names: Tuple[str, ...]) -> type:
    """A :class:`NamedOptions` type of its own for ``placement`` with the fields ``option_names``."""
    return dataclasses.make_dataclass(
        f"_{placement.title().replace('-', '').replace('_', '')}Options",
        [(name, Optional[Any], dataclasses.field(default=None)) for name in option_names],
        bases=(NamedOptions,),
        frozen=True,
        eq=False,
    )
