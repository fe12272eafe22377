"""The profiler's raw events for three of the candidates, at W = 1, with the fields that
validate/pkb_run.py classifies them by: device type, kineto's activity type, the annotation
flag, the class pkb_run.py gives, and the bytes it reads. Run under torchrun (run.sh)."""

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pkb_run = load(ROOT / "validate" / "pkb_run.py", "pkb_run")
import torch  # noqa: E402  (pkb_run sets the environment first)

rank, world_size, dev = pkb_run.setup("cuda")
x = torch.randn(1024, 1024, dtype=torch.bfloat16, device=dev)
for name in ("cand_nccl", "cand_memcpy_peer", "cand_dtype_fallback"):
    fn = load(HERE / f"{name}.py", name).solution
    events = pkb_run.profiled_events(fn, (x,), True, 2)
    seen: Counter[tuple[str, ...]] = Counter()
    meta: dict[str, str] = {}
    for e in events:
        cpu = str(e.device_type).endswith("CPU")
        if cpu and not e.name.startswith(("cu", "c10d", "nccl", "record_param", "_c10d")):
            continue
        key = (e.name[:70], str(e.device_type), str(getattr(e, "activity_type", None)),
               str(getattr(e, "is_user_annotation", None)), str(pkb_run.event_kind(e)),
               str(pkb_run.event_bytes(e)))
        seen[key] += 1
        if not cpu:
            extra = getattr(e, "extra_meta", None)
            meta.setdefault(e.name[:40], f"extra_meta={extra!r}"[:300])
    print(f"== {name}: name | device | activity | annotation | class | bytes : count (2 calls)")
    for key, count in sorted(seen.items()):
        print("  " + " | ".join(key) + f" : {count}")
    for event_name, text in meta.items():
        print(f"  meta {event_name}: {text}")
print("torch", torch.__version__, "nccl", pkb_run.nccl_version(True), file=sys.stderr)
torch.distributed.destroy_process_group()
