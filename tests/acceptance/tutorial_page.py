"""What ``docs/tutorial.md`` tells the reader to write and run, read from the page itself.

The page is split at its ``## N.`` headings into steps. In each step:

- a fenced ``python`` block preceded by ``<!-- tutorial-file: PATH -->`` is the whole content
  of ``PATH`` (relative to the project directory); with ``<!-- tutorial-file: PATH append -->``
  it is added to the end of that file (settings the reader changes in the generated file);
- each ``$ `` line of a ``console`` block is a command, with the lines after it (up to the
  next command) as the output the page shows;
- a ``pycon`` block preceded by ``<!-- docs-test: tutorial -->`` is a doctest the reader types
  into ``python manage.py shell``.

A step hands out each of these once (``take_*``); ``untaken()`` lists what no one took, so
the test that follows the page notices a block or command it does not yet act on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"

_STEP = re.compile(r"^## (\d+)\. ", re.M)
_FILE = re.compile(
    r"<!-- tutorial-file: (?P<path>\S+)(?P<append> append)? -->\n```python\n(?P<code>.*?)\n```",
    re.S,
)
_CONSOLE = re.compile(r"```console\n(?P<body>.*?)\n```", re.S)
_DOCTEST = re.compile(r"<!-- docs-test: tutorial -->\n```pycon\n(?P<code>.*?)\n```", re.S)


@dataclass(frozen=True, kw_only=True)
class FileBlock:
    path: str
    append: bool
    code: str
    line: int


@dataclass(frozen=True, kw_only=True)
class Command:
    command: str
    output: tuple[str, ...]
    line: int


@dataclass(frozen=True, kw_only=True)
class Doctest:
    code: str
    line: int


@dataclass(kw_only=True)
class Step:
    number: int
    text: str
    files: list[FileBlock] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    doctests: list[Doctest] = field(default_factory=list)

    def take_files(self) -> list[FileBlock]:
        taken, self.files = self.files, []
        return taken

    def take_commands(self) -> list[Command]:
        taken, self.commands = self.commands, []
        return taken

    def take_doctests(self) -> list[Doctest]:
        taken, self.doctests = self.doctests, []
        return taken


class TutorialPage:
    """The tutorial's steps, each with the files, commands and doctests it shows."""

    def __init__(self, path: Path = PAGE) -> None:
        self.path = path
        self.text = path.read_text()
        starts = [(int(m[1]), m.start()) for m in _STEP.finditer(self.text)]
        ends = [start for _, start in starts[1:]] + [len(self.text)]
        self.steps = {
            number: self._step(number, start, end)
            for (number, start), end in zip(starts, ends, strict=True)
        }

    def _line(self, offset: int) -> int:
        return self.text.count("\n", 0, offset) + 1

    def _step(self, number: int, start: int, end: int) -> Step:
        text = self.text[start:end]
        step = Step(number=number, text=text)
        for match in _FILE.finditer(text):
            step.files.append(
                FileBlock(
                    path=match["path"],
                    append=bool(match["append"]),
                    code=match["code"] + "\n",
                    line=self._line(start + match.start("code")),
                )
            )
        for match in _CONSOLE.finditer(text):
            first = self._line(start + match.start("body"))
            shown: list[tuple[str, int, list[str]]] = []
            for offset, line in enumerate(match["body"].splitlines()):
                if line.startswith("$ "):
                    shown.append((line[2:], first + offset, []))
                elif shown:
                    shown[-1][2].append(line)
            step.commands += [
                Command(command=command, output=tuple(output), line=line)
                for command, line, output in shown
            ]
        for match in _DOCTEST.finditer(text):
            step.doctests.append(
                Doctest(code=match["code"] + "\n", line=self._line(start + match.start("code")))
            )
        return step

    def step(self, number: int) -> Step:
        return self.steps[number]

    def untaken(self) -> list[str]:
        """Blocks and commands of the page that no step of the test acted on."""
        left: list[str] = []
        for step in self.steps.values():
            left += [f"line {f.line}: file {f.path}" for f in step.files]
            left += [f"line {c.line}: $ {c.command}" for c in step.commands]
            left += [f"line {d.line}: doctest" for d in step.doctests]
        return left
