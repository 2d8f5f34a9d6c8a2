"""``direct_init``: a frozen dataclass built by writing its fields straight into the instance
behaves as the dataclass's own ``__init__`` makes it, and a class whose ``__init__`` must do
more is refused."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

from flowledger.domain.model import Change, DispatchRequest, Operation
from flowledger.domain.records import direct_init
from flowledger.receiver.api.reply import Reply
from flowledger.services.call import Call
from flowledger.services.values import Answer, DispatchInput
from flowledger.storage.unit_of_work import Outcome


@dataclass(frozen=True)
class Plain:
    name: str
    count: int = 3
    tags: list[str] = field(default_factory=list)
    note: str | None = None


@direct_init
@dataclass(frozen=True)
class Direct:
    name: str
    count: int = 3
    tags: list[str] = field(default_factory=list)
    note: str | None = None


ARGUMENTS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    (("a",), {}),
    (("a", 5), {}),
    (("a", 5, ["x"], "n"), {}),
    (("a",), {"note": "n"}),
    ((), {"name": "a", "tags": ["y"], "count": 0}),
]


@pytest.mark.parametrize(("args", "kwargs"), ARGUMENTS)
def test_a_record_holds_what_the_dataclass_would(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    made, plain = Direct(*args, **kwargs), Plain(*args, **kwargs)
    assert dataclasses.astuple(made) == dataclasses.astuple(plain)
    assert repr(made) == repr(plain).replace("Plain", "Direct")
    assert made == Direct(*args, **kwargs) and made != plain
    assert pickle.loads(pickle.dumps(made)) == made
    assert dataclasses.replace(made, count=9) == Direct(made.name, 9, made.tags, made.note)


def test_a_record_hashes_as_the_dataclass_would() -> None:
    @dataclass(frozen=True)
    class Key:
        name: str
        count: int = 3

    @direct_init
    @dataclass(frozen=True)
    class DirectKey:
        name: str
        count: int = 3

    assert hash(DirectKey("a")) == hash(Key("a")) == hash(DirectKey("a", 3))
    assert {DirectKey("a"): 1}[DirectKey("a", count=3)] == 1


def test_a_factory_makes_a_new_value_for_each_record() -> None:
    first, second = Direct("a"), Direct("b")
    first.tags.append("x")
    assert second.tags == []


def test_a_record_refuses_assignment_and_wrong_arguments_as_the_dataclass_does() -> None:
    made = Direct("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.count = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        Direct()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Direct("a", nope=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Direct("a", 1, [], None, "too many")  # type: ignore[call-arg]


def _not_frozen() -> type:
    @dataclass
    class Loose:
        name: str

    return Loose


def _post_init() -> type:
    @dataclass(frozen=True)
    class Checked:
        name: str

        def __post_init__(self) -> None:
            pass

    return Checked


def _keyword_only() -> type:
    @dataclass(frozen=True, kw_only=True)
    class Named:
        name: str

    return Named


def _slots() -> type:
    @dataclass(frozen=True, slots=True)
    class Slotted:
        name: str

    return Slotted


def _own_name() -> type:
    @dataclass(frozen=True)
    class Clash:
        _record_dict: int

    return Clash


class _Descriptor:
    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return 5

    def __set__(self, obj: Any, value: Any) -> None:
        pass


def _descriptor_default() -> type:
    @dataclass(frozen=True)
    class Described:
        value: int = _Descriptor()  # type: ignore[assignment]

    return Described


def test_fields_named_as_the_names_of_an_init_are_kept() -> None:
    @direct_init
    @dataclass(frozen=True)
    class Named:
        self: int
        d: int = 2

    made = Named(1)
    assert (made.self, made.d) == (1, 2) and made == Named(self=1, d=2)
    assert Named.__init__.__annotations__ == {"self": "int", "d": "int", "return": None}


@pytest.mark.parametrize(
    "make", [_not_frozen, _post_init, _keyword_only, _slots, _own_name, _descriptor_default]
)
def test_a_class_whose_init_does_more_is_refused(make: Any) -> None:
    with pytest.raises(TypeError):
        direct_init(make())


@pytest.mark.parametrize(
    "cls", [Operation, DispatchRequest, Change, DispatchInput, Answer, Call, Outcome, Reply]
)
def test_the_hot_paths_records_take_the_arguments_their_fields_say(cls: type) -> None:
    """Each record's ``__init__`` takes the parameters a frozen dataclass of the same fields
    would, in the same order, with defaults on the same ones."""
    fields = dataclasses.fields(cls)
    twin = dataclasses.make_dataclass(
        cls.__name__,
        [
            (f.name, Any, field(default=f.default, default_factory=f.default_factory))
            for f in fields
        ],
        frozen=True,
    )

    def shape(init: Any) -> list[tuple[str, Any, bool]]:
        params = list(inspect.signature(init).parameters.values())[1:]
        return [(p.name, p.kind, p.default is inspect.Parameter.empty) for p in params]

    assert shape(cls.__init__) == shape(twin.__init__)
    assert "direct_init" not in cls.__init__.__qualname__
