"""What a docs page tells the reader to write and run, read from the page itself.

The page (``docs/tutorial.md``, ``docs/how-to/django-tasks.md``) is split at its ``##``
headings into steps. In each step:

- a fenced ``python`` block preceded by ``<!-- tutorial-file: PATH -->`` is the whole content
  of ``PATH`` (relative to the project directory); with ``<!-- tutorial-file: PATH append -->``
  it is added to the end of that file (settings the reader changes in the generated file);
- each ``$ `` line of a ``console`` block is a command, with the lines after it (up to the
  next command) as the output the page shows;
- a ``pycon`` block preceded by ``<!-- docs-test: tutorial -->`` is a doctest the reader types
  into ``python manage.py shell``;
- a ``python`` block preceded by ``<!-- tutorial-shell -->`` is code the reader runs in
  ``python manage.py shell``; its ``assert`` statements are its checks.

A step hands out each of these once (``take_*``); ``untaken()`` lists what no one took, so
the test that follows the page notices a block or command it does not yet act on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"

_STEP = re.compile(r"^## (.+)$", re.M)
_FILE = re.compile(
    r"<!-- tutorial-file: (?P<path>\S+)(?P<append> append)? -->\n```python\n(?P<code>.*?)\n```",
    re.S,
)
_CONSOLE = re.compile(r"```console\n(?P<body>.*?)\n```", re.S)
_DOCTEST = re.compile(r"<!-- docs-test: tutorial -->\n```pycon\n(?P<code>.*?)\n```", re.S)
_SHELL = re.compile(r"<!-- tutorial-shell -->\n```python\n(?P<code>.*?)\n```", re.S)


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
class Snippet:
    """A doctest or shell code, and the page and line its code starts on."""

    code: str
    page: str
    line: int


@dataclass(kw_only=True)
class Step:
    title: str
    text: str
    files: list[FileBlock] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    doctests: list[Snippet] = field(default_factory=list)
    shells: list[Snippet] = field(default_factory=list)

    def take_files(self) -> list[FileBlock]:
        taken, self.files = self.files, []
        return taken

    def take_commands(self) -> list[Command]:
        taken, self.commands = self.commands, []
        return taken

    def take_doctests(self) -> list[Snippet]:
        taken, self.doctests = self.doctests, []
        return taken

    def take_shells(self) -> list[Snippet]:
        taken, self.shells = self.shells, []
        return taken


class DocsPage:
    """A page's steps (``##`` sections), each with the files, commands and code it shows."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.text = (DOCS / name).read_text()
        starts = [(m[1], m.start()) for m in _STEP.finditer(self.text)]
        ends = [start for _, start in starts[1:]] + [len(self.text)]
        self.steps = [
            self._step(title, start, end) for (title, start), end in zip(starts, ends, strict=True)
        ]

    def _line(self, offset: int) -> int:
        return self.text.count("\n", 0, offset) + 1

    def _step(self, title: str, start: int, end: int) -> Step:
        text = self.text[start:end]
        step = Step(title=title, text=text)
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
        for pattern, found in ((_DOCTEST, step.doctests), (_SHELL, step.shells)):
            for match in pattern.finditer(text):
                line = self._line(start + match.start("code"))
                found.append(Snippet(code=match["code"] + "\n", page=self.name, line=line))
        return step

    def step(self, title_start: str) -> Step:
        """The one step whose heading starts with ``title_start`` (``"6."``, ``"Configure"``)."""
        (found,) = [step for step in self.steps if step.title.startswith(title_start)]
        return found

    def untaken(self) -> list[str]:
        """Blocks and commands of the page that no step of the test acted on."""
        left: list[str] = []
        for step in self.steps:
            left += [f"line {f.line}: file {f.path}" for f in step.files]
            left += [f"line {c.line}: $ {c.command}" for c in step.commands]
            left += [f"line {d.line}: doctest" for d in step.doctests]
            left += [f"line {s.line}: shell code" for s in step.shells]
        return left
