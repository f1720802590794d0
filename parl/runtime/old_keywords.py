"""The Manager's placement keywords from before options types (deprecated): ``workers=``,
``restart_workers=``, ``heartbeat_timeout=``, ``ray=`` and ``rlx=``.

    options = with_old_keywords(entry, options, {"workers": 4})    # DeprecationWarning naming the new form
    # == ProcessesOptions(workers=4), the warning: "... use Manager(placement=ProcessesOptions(workers=4))"

Each keyword is either one option of the placement's options type (``workers=4``) or a whole options
instance (``ray=RayOptions(...)``); a keyword the placement does not take is refused naming the
placements that take it.
"""

from __future__ import annotations

from typing import Dict, Mapping

from parl.moved_names import DEPRECATED_IN, deprecated
from parl.runtime import registry


def with_old_keywords(chosen: registry.Placement, options: object, keywords: Mapping[str, object]) -> object:
    """``options`` (of placement ``chosen``) with ``keywords`` (keyword -> value, none None) put in;
    warns (DeprecationWarning, at the caller of the Manager) naming the options to pass instead.

    Raises:
        ValueError: a keyword the placement does not take (naming the placements that do), or a bad
            option value.
    """
    values: Dict[str, object] = registry.option_values(options)
    whole = {keyword: value for keyword, value in keywords.items() if registry.is_options(value)}
    for keyword, value in whole.items():  # first: a single option given beside them goes on top
        owner = registry.entry_of(value).name
        if owner != chosen.name:
            raise ValueError(f"{keyword} applies to placement {owner!r} only, got placement {chosen.name!r}")
        values.update(registry.option_values(value))
    for keyword, value in keywords.items():
        if keyword in whole:
            continue
        if keyword not in chosen.options:
            takers = " or ".join(map(repr, registry.taking(keyword)))
            raise ValueError(f"{keyword} applies to placement {takers} only, got placement {chosen.name!r}")
        values[keyword] = value
    old = f"Manager({', '.join(f'{k}=...' for k in keywords)})"
    new = f"Manager(placement={_constructor_text(chosen.options_type, values)})"
    deprecated(old, new, DEPRECATED_IN, stacklevel=4)
    return chosen.make_options(values)


def _constructor_text(kind: type, values: Mapping[str, object]) -> str:
    """``ProcessesOptions(workers=4)``: options type ``kind`` with those of ``values`` that differ from its defaults."""
    defaults = registry.option_values(kind())
    changed = {k: v for k, v in values.items() if k not in defaults or defaults[k] != v}
    return f"{kind.__name__}({', '.join(f'{k}={v!r}' for k, v in changed.items())})"
