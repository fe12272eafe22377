"""Read a parsed YAML mapping field by field, with the file and field path in every error."""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pkbsim.bounds import Quantity, check, range_for, show
from pkbsim.errors import PkbsimError, close_names, did_you_mean
from pkbsim.inputs import check_nesting, read_bytes

# the C loader is several times faster; fall back where libyaml is absent
_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_MISSING = object()


class _Loader(_Base):  # type: ignore[misc]
    """The safe loader, refusing a key that appears twice in one mapping."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) or key is None:
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(path: Path, error: type[PkbsimError]) -> tuple[Mapping[str, Any], str]:
    """Parse ``path`` (a regular file of bounded size); return the top-level mapping and the
    file's sha256. Duplicate keys, anchors and aliases, base-60 numbers, deep nesting and
    unreadable numbers are errors."""
    raw = read_bytes(path, error=error)
    loader = _Loader(raw)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_nodes(node, str(path), error)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise error(f"not valid YAML{where}: {problem}", file=str(path)) from None
    except RecursionError:
        raise error("not valid YAML: nested too deeply", file=str(path)) from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer of 5,000 digits
        raise error(f"not valid YAML: {' '.join(str(exc).split())[:200]}",
                    file=str(path)) from None
    finally:
        loader.dispose()
    if not isinstance(data, Mapping):
        raise error("expected a mapping at the top level", file=str(path))
    check_nesting(data, file=str(path), error=error)
    return data, hashlib.sha256(raw).hexdigest()


class _NoAliases(yaml.SafeDumper):
    """Writes a value used twice in full both times: pkbsim reads no anchors or aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def yaml_text(data: Any, width: int = 10_000) -> str:
    """``data`` as YAML that ``load_yaml`` reads back (keys in order, no anchors)."""
    return str(yaml.dump(data, Dumper=_NoAliases, sort_keys=False, allow_unicode=True,
                         width=width))


# YAML 1.1 reads 1:30 as 90 and 1:30.5 as 90.5; YAML 1.2 and every reader of these files expect
# text or an error
_SEXAGESIMAL = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")
_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


def _check_nodes(root: yaml.Node, file: str, error: type[PkbsimError]) -> None:
    """Walk the parsed nodes once, before any value is built. An anchor reused by an alias
    (``*name``) is refused: nine levels of nine aliases expand to 387 million values, and
    pkbsim's files never need one. A plain scalar in base-60 notation is refused with its
    field. Without aliases the nodes form a tree, so the walk is linear in the file."""
    seen: set[int] = set()
    queue: deque[tuple[yaml.Node, str]] = deque([(root, "")])  # breadth first: the first
    while queue:                                                # alias found is the shallowest
        node, where = queue.popleft()
        if id(node) in seen:
            raise error(f"an alias of the anchor at line {node.start_mark.line + 1}: YAML "
                        "anchors and aliases (&name, *name, <<: *name) are not accepted in "
                        "pkbsim's files; write the value out", file=file, field=where or None)
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if node.tag in _NUMBER_TAGS and not node.style \
                    and _SEXAGESIMAL.fullmatch(node.value):
                raise error(f"{node.value[:40]} is YAML 1.1's base-60 notation, not accepted: "
                            "write the number, or quote it if it is text", file=file,
                            field=where or f"line {node.start_mark.line + 1}")
        elif isinstance(node, yaml.SequenceNode):
            queue.extend((item, f"{where}[{i}]") for i, item in enumerate(node.value))
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                queue.append((key, where))
                queue.append((value, f"{where}.{name}" if where else str(name)))


@dataclass
class Fields:
    """A mapping being read; records which keys were used so unknown keys can be rejected."""

    data: Mapping[str, Any]
    file: str
    path: str
    error: type[PkbsimError]
    used: set[str] = field(default_factory=set)

    def _where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str, message: str) -> PkbsimError:
        return self.error(message, file=self.file, field=self._where(key))

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        self.used.add(key)
        if key in self.data:
            return self.data[key]
        if default is _MISSING:
            typed = close_names(key, [str(k) for k in self.data if k not in self.used], 1)
            hint = f" (the file has {typed[0]!r}: a typo?)" if typed else ""
            raise self.fail(key, "is required but missing" + hint)
        return default

    def num(self, key: str, default: Any = _MISSING, *, lo: float | None = None,
            hi: float | None = None, lo_open: bool = False) -> float:
        """A finite number in the range of the field's unit (``bounds.range_for``), narrowed
        by ``lo`` and ``hi``."""
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, f"expected a number, got {show(value)}")
        return float(check(value, self._range(key, False, lo, hi, lo_open), source=self.file,
                           field=self._where(key), error=self.error))

    def integer(self, key: str, default: Any = _MISSING, *, lo: int | None = None) -> int:
        """A whole number in the range of the field's quantity, at least ``lo``."""
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {show(value)}")
        return int(check(value, self._range(key, True, lo, None, False), source=self.file,
                         field=self._where(key), error=self.error))

    def _range(self, key: str, integer: bool, lo: float | None, hi: float | None,
               lo_open: bool) -> Quantity:
        q = range_for(self._where(key), integer)
        return Quantity(q.name, q.lo if lo is None else lo, q.hi if hi is None else hi,
                        integer, q.lo_open if lo is None else lo_open, q.what, q.least)

    def text(self, key: str, default: Any = _MISSING, *, choices: tuple[str, ...] = ()) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str):
            raise self.fail(key, f"expected text, got {show(value)}")
        if choices and value not in choices:
            raise self.fail(key, f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    def flag(self, key: str, default: Any = _MISSING) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {value!r}")
        return value

    def expr(self, key: str, default: Any = _MISSING) -> str | float | int:
        """A number or an expression string (checked later, when evaluated)."""
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.fail(key, f"expected a number or an expression, got {value!r}")
        return value

    def strings(self, key: str, default: Any = _MISSING) -> tuple[str, ...]:
        value = self.raw(key, default)
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, f"expected a list of text, got {value!r}")
        return tuple(value)

    def sub(self, key: str, default: Any = _MISSING) -> Fields:
        value = self.raw(key, default)
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            raise self.fail(key, f"expected a mapping, got {type(value).__name__}")
        return Fields(value, self.file, self._where(key), self.error)

    def items(self, key: str) -> Iterator[tuple[str, Fields | Any]]:
        """Iterate a mapping-valued field as (name, value) pairs."""
        value = self.raw(key, {})
        if value is None:
            return
        if not isinstance(value, Mapping):
            raise self.fail(key, f"expected a mapping, got {type(value).__name__}")
        yield from value.items()

    def seq(self, key: str, default: Any = _MISSING) -> list[Fields]:
        value = self.raw(key, default)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list, got {type(value).__name__}")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, Mapping):
                raise self.fail(f"{key}[{i}]", f"expected a mapping, got {type(item).__name__}")
            out.append(Fields(item, self.file, f"{self._where(key)}[{i}]", self.error))
        return out

    def done(self) -> None:
        """Reject keys that were never read: typos must not pass silently."""
        unknown = sorted(set(self.data) - self.used, key=str)
        if unknown:
            allowed = sorted(self.used)
            raise self.fail(str(unknown[0]), "unknown field" + (
                f"; expected one of: {', '.join(allowed)}" if allowed else "")
                + did_you_mean(str(unknown[0]), allowed))

