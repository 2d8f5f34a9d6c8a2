"""Frozen dataclasses made for less on the hot path: :func:`direct_init`.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (its own
``__setattr__`` refuses), one call per field, several times the cost of a plain assignment;
the workflow calls make several frozen records for every call (the operation before and after,
the rule's change, the answer and its reply). :func:`direct_init` gives such a class an
``__init__`` that writes the fields into the new instance's ``__dict__`` at once, which the
class's ``__setattr__`` never sees. Everything else stays the dataclass's own: the fields,
their defaults and factories, equality, hashing, ``repr``, :func:`dataclasses.replace`,
pickling and the refusal to assign (bench/README.md, "Where the SQLite receiver stands").
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")

_MISSING = object()  # a factory's field left out by the caller


def direct_init(cls: type[T]) -> type[T]:
    """Replace the ``__init__`` of ``cls``, a frozen dataclass (apply it over
    ``@dataclass(frozen=True)``) with one that takes the same arguments and writes them
    straight into the instance's ``__dict__``. Refuses a class whose ``__init__`` does more
    than set its fields (``__post_init__``, init-only or keyword-only fields, slots, a
    descriptor as a default) or a field named as the new ``__init__``'s own names
    (``_record_…``)."""
    params = vars(cls).get("__dataclass_params__")
    if params is None or not params.frozen:
        raise TypeError(f"{cls.__name__}: direct_init is for frozen dataclasses")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    plain = (
        not hasattr(cls, "__post_init__")
        and "__slots__" not in cls.__dict__
        # no init-only (nor class) variables beside the fields
        and len(fields) == len(vars(cls)["__dataclass_fields__"])
        and all(f.init and not f.kw_only for f in fields)
        and not any(f.name.startswith("_record_") for f in fields)  # the names used below
        # a descriptor for a field: the dataclass's __init__ assigns through it
        and not any(hasattr(type(vars(cls).get(f.name)), "__set__") for f in fields)
    )
    if not plain:
        raise TypeError(f"{cls.__name__}: its __init__ does more than set its fields")
    namespace: dict[str, Any] = {"_record_missing": _MISSING}
    arguments, lines = ["_record_self"], ["_record_dict = _record_self.__dict__"]
    for f in fields:
        name = f.name
        if f.default is not dataclasses.MISSING:
            namespace[f"_record_default_{name}"] = f.default
            arguments.append(f"{name}=_record_default_{name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_record_factory_{name}"] = f.default_factory
            arguments.append(f"{name}=_record_missing")
            lines.append(f"if {name} is _record_missing: {name} = _record_factory_{name}()")
        else:
            arguments.append(name)
        lines.append(f"_record_dict[{name!r}] = {name}")
    source = f"def __init__({', '.join(arguments)}):\n" + "".join(f"    {line}\n" for line in lines)
    exec(source, namespace)  # the source is made above from the fields' names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    setattr(cls, "__init__", init)  # noqa: B010
    return cls
