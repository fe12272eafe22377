"""The evidence log of an inspection: for each finding, the file lines that show it."""

from __future__ import annotations

SNIPPET_CHARS = 120


class EvidenceLog:
    """Findings by name, each with its lines and their snippets; names starting "_" are
    working notes that ``freeze`` leaves out."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.found: dict[str, dict[int, str]] = {}

    def add(self, name: str, line: int) -> None:
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.found.setdefault(name, {}).setdefault(line, text[:SNIPPET_CHARS])

    def has(self, name: str) -> bool:
        return bool(self.found.get(name))

    def copy(self, src: str, dst: str) -> None:
        for line in self.found.get(src, {}):
            self.add(dst, line)

    def freeze(self) -> dict[str, tuple[tuple[int, str], ...]]:
        return {name: tuple(sorted(lines.items())) for name, lines in sorted(self.found.items())
                if not name.startswith("_")}
