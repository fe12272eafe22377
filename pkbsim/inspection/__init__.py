"""Static inspection of candidate solutions: what moves the data, what waits, what runs per
call, each finding with the file lines that show it."""

from pkbsim.inspection.solution import (
    InspectError,
    Inspection,
    inspect_file,
    inspect_path,
    inspect_paths,
    inspect_source,
)

__all__ = ["InspectError", "Inspection", "inspect_file", "inspect_path", "inspect_paths",
           "inspect_source"]
