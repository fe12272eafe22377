"""PKB problems as data: parameters, presets, groups and ordered ops with their bytes."""

from pkbsim.task.loader import find_task, list_tasks, load_task
from pkbsim.task.schema import CommOp, ComputeOp, Op, TaskInstance, TaskSpec

__all__ = ["CommOp", "ComputeOp", "Op", "TaskInstance", "TaskSpec", "find_task", "list_tasks",
           "load_task"]
