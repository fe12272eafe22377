"""Load task files into :class:`TaskSpec` and instantiate them at a world size and preset."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from pkbsim import expr
from pkbsim.bounds import EiB, Quantity, check, check_int, show
from pkbsim.datafiles import data_dir, looks_like_path, nearest
from pkbsim.errors import (
    ExpressionError,
    InfeasibleError,
    NotApplicableError,
    PkbsimError,
    TaskError,
    UsageError,
    did_you_mean,
)
from pkbsim.fields import Fields, load_yaml
from pkbsim.inputs import path_kind
from pkbsim.limits import TASK_OPS
from pkbsim.task.schema import (
    COMM_KINDS,
    COMPUTE_KINDS,
    GROUP_LAYOUTS,
    REDUCE_OPS,
    REDUCING_KINDS,
    ROOTED_KINDS,
    SEND_RECV_PATTERNS,
    CommOp,
    ComputeOp,
    ConstraintSpec,
    GroupSpec,
    Op,
    OpSpec,
    ParamSpec,
    PresetSpec,
    TaskInstance,
    TaskSpec,
)
from pkbsim.units import DTYPE_BYTES

SCHEMA_VERSION = 1
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED = {"W"} | set(expr.FUNCTIONS)
_COMM_FIELDS = ("bytes_per_rank", "elements_per_rank", "dtype", "group", "root", "rotate_root",
                "reduce_op", "pattern", "data_dependent", "imbalance", "api")
_COMPUTE_FIELDS = ("compute", "flops", "hbm_bytes", "dtype", "tensor_core", "launches", "ranks",
                   "root", "imbalance")
PRODUCTION = "production"  # --preset production: each task's preset marked production: true
RANK_ROLES = ("all", "root", "non_root")
_TEXT_FIELDS = ("dtype", "group", "reduce_op", "pattern", "compute", "api", "note", "ranks")
_COMMON_FIELDS = ("id", "kind", "after", "repeat", "chain", "host_syncs", "note")


# ---------------------------------------------------------------- finding files

def _task_files() -> list[Path]:
    return sorted(data_dir("tasks").glob("*.yaml"), key=_sort_key)


def _sort_key(path: Path) -> tuple[int, str]:
    head = path.stem.split("_", 1)[0]
    return (int(head) if head.isdigit() and len(head) <= 9 else 10**9, path.stem)


@lru_cache(maxsize=1)
def _index() -> dict[str, Path]:
    """Every way to name a shipped task: id, name, ``id_name`` and aliases."""
    index: dict[str, Path] = {}
    for path in _task_files():
        index[path.stem] = path
        head, _, rest = path.stem.partition("_")
        if head.isdigit():
            index[head] = path
            index[rest] = path
        for alias in _aliases(path):
            index.setdefault(alias, path)
    return index


_ALIASES_RE = re.compile(r"^aliases:\s*\[([^\]]*)\]", re.MULTILINE)


def _aliases(path: Path) -> list[str]:
    """A task file's aliases, read without parsing the whole file (``aliases: [a, b]``)."""
    try:
        match = _ALIASES_RE.search(path.read_text())
    except OSError:
        return []  # reported when the file itself is loaded
    if not match:
        return []
    return [a.strip().strip("'\"") for a in match.group(1).split(",") if a.strip()]


def list_tasks() -> list[Path]:
    return _task_files()


def shipped_tasks() -> list[tuple[Path, TaskSpec | PkbsimError]]:
    """Every shipped task file, loaded, or the error that stops it loading."""
    out: list[tuple[Path, TaskSpec | PkbsimError]] = []
    for path in list_tasks():
        try:
            out.append((path, load_task(str(path))))
        except PkbsimError as exc:
            out.append((path, exc))
    return out


def find_task(name: str) -> Path:
    """A task's id, name, ``id_name``, alias, or a path to a user's file."""
    if looks_like_path(name):
        path = Path(name)
        kind = path_kind(path, error=TaskError)
        if kind != "file":
            raise TaskError("no such file" if kind == "missing" else "not a regular file",
                            file=name)
        return path
    index = _index()
    if name in index:
        return index[name]
    names = sorted(k for k in index if not k.isdigit())
    close = nearest(name, names)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UsageError(f"unknown task {name!r}{hint} (see 'pkbsim tasks list')")


def load_task(name: str) -> TaskSpec:
    path = find_task(name)
    data, sha = load_yaml(path, TaskError)
    return parse_task(data, str(path), sha)


# ---------------------------------------------------------------- parsing

def parse_task(data: Mapping[str, Any], file: str, sha256: str = "") -> TaskSpec:
    top = Fields(data, file, "", TaskError)
    version = top.integer("schema_version")
    if version != SCHEMA_VERSION:
        raise top.fail("schema_version", f"expected {SCHEMA_VERSION}, got {version}")
    task_id = top.integer("id", lo=1)
    name = top.text("name")
    if not _NAME_RE.match(name):
        raise top.fail("name", "expected letters, digits and underscores")
    aliases = top.strings("aliases", [])
    ws = top.sub("world_size")
    default_ws = ws.integer("default", 8, lo=1)
    constraints = tuple(ConstraintSpec(c.text("check"), c.text("why"))
                        for c in ws.seq("constraints", []))
    ws.done()
    params = _params(top)
    derived = _derived(top, {p.name for p in params})
    known = {p.name for p in params} | {n for n, _ in derived}
    presets = _presets(top, known, params)
    groups = _groups(top)
    ops = _ops(top, groups)
    spec = TaskSpec(
        id=task_id, name=name, aliases=aliases, title=top.text("title"),
        source=top.text("source"), parallelism=top.text("parallelism"),
        description=top.text("description", ""), default_world_size=default_ws,
        constraints=constraints, params=params, derived=derived, presets=presets,
        groups=groups, ops=ops, notes=top.text("notes", ""), file=file, sha256=sha256,
    )
    top.done()
    _check_names(spec, top)
    return spec


def _params(top: Fields) -> tuple[ParamSpec, ...]:
    out = []
    for name, value in top.items("params"):
        if not _NAME_RE.match(str(name)) or name in _RESERVED:
            raise top.fail(f"params.{name}", "is not a usable parameter name")
        if isinstance(value, Mapping):
            f = Fields(value, top.file, f"params.{name}", TaskError)
            number, help_text = f.raw("value"), f.text("help", "")
            where = f"params.{name}.value"
            f.done()
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            number, help_text, where = value, "", f"params.{name}"
        else:
            raise top.fail(f"params.{name}", "expected a number or {value, help}, got "
                           f"{type(value).__name__}")
        integer = isinstance(number, int) and not isinstance(number, bool)
        number = check(number, "parameter", source=top.file, field=where, error=TaskError)
        out.append(ParamSpec(str(name), int(number) if float(number).is_integer() else number,
                             help_text, integer))
    return tuple(out)


def _derived(top: Fields, params: set[str]) -> tuple[tuple[str, str | int | float], ...]:
    out: list[tuple[str, str | int | float]] = []
    for name, value in top.items("derived"):
        if not _NAME_RE.match(str(name)) or name in _RESERVED or name in params:
            raise top.fail(f"derived.{name}", "is not a usable name (or repeats a parameter)")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise top.fail(f"derived.{name}", f"expected an expression, got {value!r}")
        _parse_or_fail(value, top.file, f"derived.{name}")
        out.append((str(name), value))
    return tuple(out)


WHOLE_PARAMETER = Quantity("parameter", -EiB, EiB, integer=True,
                           what="a task parameter written as an integer")


def param_value(param: ParamSpec | None, value: object, *, source: str | None = None,
                field: str | None = None, error: type[PkbsimError] = UsageError
                ) -> float | int:
    """``value`` for ``param`` (None: a derived value): in the parameters' range, and a whole
    number (made an int) where the task file writes the parameter as an integer."""
    if param is None or not param.integer:
        return check(value, "parameter", source=source, field=field, error=error)
    try:
        return int(check(value, WHOLE_PARAMETER, source=source, field=field, error=error))
    except PkbsimError as exc:
        raise error(f"{exc.message} ({param.name} is a whole number: the task file gives "
                    f"{param.value})", file=source, field=field) from None


def _presets(top: Fields, known: set[str], params: tuple[ParamSpec, ...]
             ) -> dict[str, PresetSpec]:
    declared = {p.name: p for p in params}
    presets: dict[str, PresetSpec] = {}
    for name, value in top.items("presets"):
        f = Fields(value if isinstance(value, Mapping) else {}, top.file, f"presets.{name}",
                   TaskError)
        if not isinstance(value, Mapping):
            raise top.fail(f"presets.{name}", "expected a mapping")
        values: dict[str, float | int] = {}
        for key, v in f.items("set"):
            if key not in known:
                raise f.fail(f"set.{key}", "is not a parameter or derived value of this task")
            values[str(key)] = param_value(declared.get(str(key)), v, source=f.file,
                                           field=f"{f.path}.set.{key}", error=TaskError)
        world = f.integer("world_size", None, lo=1) if f.has("world_size") else None
        f.raw("world_size", None)
        production = f.flag("production", False)
        if name == PRODUCTION:
            raise top.fail(f"presets.{name}", "is reserved: mark the production-size preset "
                           "with 'production: true' instead")
        presets[str(name)] = PresetSpec(str(name), f.text("description"), f.text("source", ""),
                                        values, world, production)
        f.done()
    if "pkb" not in presets:
        raise top.fail("presets", "must define preset 'pkb' (PKB's default sizes)")
    marked = [p.name for p in presets.values() if p.production]
    if len(marked) > 1:
        raise top.fail(f"presets.{marked[1]}.production",
                       f"only one preset may be marked production (also {marked[0]})")
    if "pkb" in marked:
        raise top.fail("presets.pkb.production", "the pkb preset is PKB's size, not production")
    return presets


def _groups(top: Fields) -> dict[str, GroupSpec]:
    groups = {"world": GroupSpec("world", "W", "contiguous")}
    for name, value in top.items("groups"):
        if name == "world" or not isinstance(value, Mapping):
            raise top.fail(f"groups.{name}", "expected a mapping {size, layout}; 'world' is "
                           "built in")
        f = Fields(value, top.file, f"groups.{name}", TaskError)
        size = f.expr("size")
        _parse_or_fail(size, top.file, f"groups.{name}.size")
        groups[str(name)] = GroupSpec(str(name), size, f.text("layout", "contiguous",
                                                             choices=GROUP_LAYOUTS))
        f.done()
    return groups


def _ops(top: Fields, groups: dict[str, GroupSpec]) -> tuple[OpSpec, ...]:
    raw_ops = top.raw("ops", None)
    if isinstance(raw_ops, list):  # before each is read: every op costs work in every command
        TASK_OPS.check(len(raw_ops), "listed", TaskError, top.file, "ops")
    items = top.seq("ops")
    if not items:
        raise top.fail("ops", "needs at least one op")
    out: list[OpSpec] = []
    seen: set[str] = set()
    for f in items:
        op_id = f.text("id")
        if not _NAME_RE.match(op_id) or op_id in seen:
            raise f.fail("id", f"must be a unique name, got {op_id!r}")
        kind = f.text("kind", choices=(*COMM_KINDS, "compute"))
        after: tuple[str, ...] | None = None
        if f.has("after"):
            after = f.strings("after")
            for dep in after:
                if dep not in seen:
                    raise f.fail("after", f"refers to {dep!r}, which is not an earlier op")
        else:
            f.raw("after", None)
        allowed = _COMMON_FIELDS + (_COMPUTE_FIELDS if kind == "compute" else _COMM_FIELDS)
        fields = {k: v for k, v in f.data.items() if k not in ("id", "kind", "after")}
        for key in fields:
            if key not in allowed:
                raise f.fail(str(key), f"unknown field for a {kind} op; expected one of: "
                             + ", ".join(k for k in allowed if k not in ("id", "kind")))
        _check_op_fields(f, kind, fields, groups)
        seen.add(op_id)
        out.append(OpSpec(op_id, kind, dict(fields), after, f.path))
    return tuple(out)


def _check_op_fields(f: Fields, kind: str, fields: Mapping[str, Any],
                     groups: dict[str, GroupSpec]) -> None:
    for key in _TEXT_FIELDS:
        if key in fields and not isinstance(fields[key], str):
            raise f.fail(key, f"expected text, got {show(fields[key])}")
    dtype = fields.get("dtype", "bf16")
    if dtype not in DTYPE_BYTES:
        raise f.fail("dtype", f"unknown dtype {dtype!r}; expected one of: "
                     + ", ".join(DTYPE_BYTES))
    for key in ("repeat", "host_syncs", "bytes_per_rank", "elements_per_rank", "root",
                "imbalance", "flops", "hbm_bytes", "launches"):
        if key in fields:
            value = fields[key]
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise f.fail(key, f"expected a number or an expression, got {value!r}")
            _parse_or_fail(value, f.file, f"{f.path}.{key}")
    for key in ("chain", "data_dependent", "tensor_core", "rotate_root"):
        if key in fields and not isinstance(fields[key], bool):
            raise f.fail(key, f"expected true or false, got {fields[key]!r}")
    if kind == "compute":
        if fields.get("compute") not in COMPUTE_KINDS:
            raise f.fail("compute", "expected one of: " + ", ".join(COMPUTE_KINDS))
        if fields.get("ranks", "all") not in RANK_ROLES:
            raise f.fail("ranks", "expected one of: " + ", ".join(RANK_ROLES))
        if "root" in fields and fields.get("ranks", "all") == "all":
            raise f.fail("root", "only ops with ranks: root or non_root take a root")
        for key in ("flops", "hbm_bytes"):
            if key not in fields:
                raise f.fail(key, "is required for a compute op (use 0 if none)")
        return
    if ("bytes_per_rank" in fields) == ("elements_per_rank" in fields):
        raise f.fail("bytes_per_rank", "give exactly one of bytes_per_rank or "
                     "elements_per_rank (with dtype)")
    group = fields.get("group", "world")
    if group not in groups:
        raise f.fail("group", f"unknown group {group!r}; defined: {', '.join(groups)}")
    if "reduce_op" in fields:
        if kind not in REDUCING_KINDS:
            raise f.fail("reduce_op", f"only {', '.join(REDUCING_KINDS)} take a reduce_op")
        if fields["reduce_op"] not in REDUCE_OPS:
            raise f.fail("reduce_op", "expected one of: " + ", ".join(REDUCE_OPS))
    for key in ("root", "rotate_root"):
        if key in fields and kind not in ROOTED_KINDS:
            raise f.fail(key, f"only {', '.join(ROOTED_KINDS)} take a {key}")
    if kind == "send_recv":
        if fields.get("pattern") not in SEND_RECV_PATTERNS:
            raise f.fail("pattern", "send_recv needs pattern: " + ", ".join(SEND_RECV_PATTERNS))
    elif "pattern" in fields:
        raise f.fail("pattern", "only send_recv takes a pattern")


def _parse_or_fail(value: object, file: str, field: str) -> None:
    if isinstance(value, str):
        try:
            expr.parse(value)
        except ExpressionError as exc:
            raise TaskError(exc.message, file=file, field=field) from None


def _check_names(spec: TaskSpec, top: Fields) -> None:
    """Every name an expression uses must be W, a parameter, or an earlier derived value."""
    known = {"W"} | {p.name for p in spec.params}
    for name, value in spec.derived:
        _names_known(value, known, spec.file, f"derived.{name}")
        known.add(name)
    for i, c in enumerate(spec.constraints):
        _names_known(c.check, known, spec.file, f"world_size.constraints[{i}].check")
    for g in spec.groups.values():
        _names_known(g.size, known, spec.file, f"groups.{g.name}.size")
    for op in spec.ops:
        for key, field_value in op.fields.items():
            if isinstance(field_value, str) and key not in _TEXT_FIELDS:
                _names_known(field_value, known, spec.file, f"{op.field_path}.{key}")


def _names_known(value: object, known: set[str], file: str, field: str) -> None:
    if not isinstance(value, str):
        return
    try:
        unknown = expr.names(value) - known
    except ExpressionError as exc:
        raise TaskError(exc.message, file=file, field=field) from None
    if unknown:
        raise TaskError(f"expression {value!r} uses unknown name {sorted(unknown)[0]!r}",
                        file=file, field=field)


# ---------------------------------------------------------------- instantiation

def resolve_preset(spec: TaskSpec, preset: str) -> str:
    """``production`` names the task's preset marked ``production: true``."""
    if preset != PRODUCTION:
        return preset
    chosen = spec.production_preset
    if chosen is None:
        raise NotApplicableError(f"task {spec.key} has no production preset (presets: "
                                 f"{', '.join(spec.presets)})")
    return chosen


def instantiate(spec: TaskSpec, world_size: int | None = None, preset: str = "pkb",
                overrides: Mapping[str, float | int] | None = None) -> TaskInstance:
    """Evaluate every expression at ``world_size`` with ``preset`` and ``--set`` overrides."""
    preset = resolve_preset(spec, preset)
    if preset not in spec.presets:
        raise NotApplicableError(f"task {spec.key} has no preset {preset!r} "
                                 f"(presets: {', '.join(spec.presets)})"
                                 + did_you_mean(preset, [*spec.presets, PRODUCTION]))
    chosen = spec.presets[preset]
    overrides = dict(overrides or {})
    settable = spec.settable()
    declared = {p.name: p for p in spec.params}
    for key, given in overrides.items():
        overrides[key] = param_value(declared.get(key), given, field=f"--set {key}")
        if key not in settable:
            raise UsageError(f"unknown --set key {key!r} for task {spec.key}; task keys: "
                             + ", ".join(settable) + "; topology keys are dotted, e.g. "
                             "scale_up.bandwidth_GBps" + did_you_mean(key, settable))
    w = world_size if world_size is not None else (chosen.world_size or spec.default_world_size)
    if isinstance(w, int) and not isinstance(w, bool) and w < 1:
        raise InfeasibleError(f"world size must be at least 1, got {w}")
    w = check_int(w, "world_size", field="world size")
    env: dict[str, float | int] = {"W": w}
    fixed = {**chosen.values, **overrides}
    for p in spec.params:
        env[p.name] = fixed.get(p.name, p.value)
    for name, value in spec.derived:
        env[name] = fixed[name] if name in fixed else check(
            _eval(value, env, spec, f"derived.{name}"), "parameter", source=spec.file,
            field=f"derived.{name}", error=TaskError)
    for c in spec.constraints:
        if not _eval(c.check, env, spec, "world_size.constraints"):
            raise InfeasibleError(f"task {spec.key} cannot run at world size {w}: "
                                  f"constraint '{c.check}' fails ({c.why})")
    group_sizes = _group_sizes(spec, env, w)
    ops: list[Op] = []
    previous: tuple[str, ...] = ()
    for op in spec.ops:
        after = op.after if op.after is not None else previous
        ops.append(_instantiate_op(spec, op, env, group_sizes, after))
        previous = (op.id,)
    return TaskInstance(spec, w, preset, dict(env), overrides, tuple(ops))


WORLD_SIZE_SCAN = 72  # world_sizes() tries 1 to this (the largest shipped NVLink domain)


def world_sizes(spec: TaskSpec, preset: str = "pkb", upto: int = WORLD_SIZE_SCAN
                ) -> tuple[int, ...]:
    """The world sizes from 1 to ``upto`` at which ``spec`` instantiates at ``preset``: its
    constraints hold and its groups divide the ranks."""
    out = []
    for w in range(1, upto + 1):
        try:
            instantiate(spec, w, preset)
        except (InfeasibleError, ExpressionError):
            continue
        out.append(w)
    return tuple(out)


def _group_sizes(spec: TaskSpec, env: Mapping[str, float | int], w: int) -> dict[str, int]:
    sizes = {}
    for g in spec.groups.values():
        size = _eval(g.size, env, spec, f"groups.{g.name}.size")
        if not math.isfinite(size) or size != int(size) or size < 1 or w % int(size) != 0:
            raise InfeasibleError(f"task {spec.key} cannot run at world size {w}: group "
                                  f"{g.name!r} has size {size:g}, which must divide {w}")
        sizes[g.name] = int(size)
    return sizes


def _eval(value: object, env: Mapping[str, float | int], spec: TaskSpec, field: str
          ) -> float | int:
    try:
        return expr.evaluate(value, env)  # type: ignore[arg-type]
    except ExpressionError as exc:
        raise TaskError(exc.message, file=spec.file, field=field) from None


def _instantiate_op(spec: TaskSpec, op: OpSpec, env: Mapping[str, float | int],
                    group_sizes: Mapping[str, int], after: tuple[str, ...]) -> Op:
    fields = op.fields

    def num(key: str, default: float | int, quantity: str) -> float:
        """The field evaluated, inside its quantity's range (a count: a whole number)."""
        where = f"{op.field_path}.{key}"
        result = _eval(fields.get(key, default), env, spec, where)
        if isinstance(result, (int, float)) and result < 0:
            raise TaskError(f"evaluates to {result:g}; expected >= 0", file=spec.file,
                            field=where)
        return float(check(result, quantity, source=spec.file, field=where, error=TaskError))

    repeat = int(num("repeat", 1, "repeat"))
    common: dict[str, Any] = {
        "id": op.id, "repeat": repeat, "chain": bool(fields.get("chain", False)),
        "after": after, "host_syncs": int(num("host_syncs", 0, "host_syncs")),
        "note": str(fields.get("note", "")),
    }
    dtype = str(fields.get("dtype", "bf16"))
    imbalance = num("imbalance", 1, "number")
    if imbalance < 1:
        raise TaskError(f"evaluates to {imbalance:g}; the largest rank over the mean is >= 1",
                        file=spec.file, field=f"{op.field_path}.imbalance")
    imbalance = check(imbalance, "imbalance", source=spec.file,
                      field=f"{op.field_path}.imbalance", error=TaskError)
    if op.kind == "compute":
        root = int(num("root", 0, "root"))
        if root >= int(env["W"]):
            raise InfeasibleError(f"task {spec.key} op {op.id}: root {root} is outside the "
                                  f"world of {env['W']} ranks")
        return ComputeOp(kind=str(fields["compute"]), flops=num("flops", 0, "flops"),
                         hbm_bytes=num("hbm_bytes", 0, "bytes"), dtype=dtype,
                         tensor_core=bool(fields.get("tensor_core", fields["compute"] == "gemm")),
                         launches=int(num("launches", 1, "launches")),
                         ranks=str(fields.get("ranks", "all")), root=root, imbalance=imbalance,
                         **common)
    if "bytes_per_rank" in fields:
        nbytes = num("bytes_per_rank", 0, "bytes")
    else:
        nbytes = num("elements_per_rank", 0, "bytes") * DTYPE_BYTES[dtype]
    group = str(fields.get("group", "world"))
    root = int(num("root", 0, "root"))
    if root >= group_sizes[group]:
        raise InfeasibleError(f"task {spec.key} op {op.id}: root {root} is outside group "
                              f"{group!r} of size {group_sizes[group]}")
    return CommOp(
        kind=op.kind, bytes_per_rank=nbytes, dtype=dtype, group=group,
        group_size=group_sizes[group], group_layout=spec.groups[group].layout, root=root,
        reduce_op=(str(fields.get("reduce_op", "sum")) if op.kind in REDUCING_KINDS else None),
        pattern=(str(fields["pattern"]) if op.kind == "send_recv" else None),
        data_dependent=bool(fields.get("data_dependent", False)), imbalance=imbalance,
        api=str(fields.get("api", "")), rotate_root=bool(fields.get("rotate_root", False)),
        **common,
    )
