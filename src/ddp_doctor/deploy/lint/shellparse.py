"""Shell text -> simple commands and assignments in source order, read by tree-sitter-bash.

A real bash grammar (tree-sitter-bash from PyPI) rather than a tokenizer of our own: arrays,
`[[ ]]`, `(( ))`, `case`, functions, heredocs and `#` inside a word (a pyxis image
`nvcr.io#nvidia/pytorch:24.01`) are read as bash reads them. tree-sitter never raises: a part it
cannot read becomes an ERROR node and the rest of the script is still read. Whether bash itself
accepts the script is `bash -n`'s call (`syntax_error`).

Words keep `$VAR` / `${...}` / `$(...)` as written; the caller expands them from the script's own
assignments (scripts.py), because which assignment is in force depends on the order of statements.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_COMMANDS = 5000
"""Commands kept per text; a launch script has tens. Past this the rest is left unread."""
MAX_TEXT = 16 * 1024 * 1024
SYNTAX_TIMEOUT_S = 5.0

# Expansions that can stand for several words: $X, ${X}, ${X[@]}, ${X[*]} (quoted or not).
_SPLAT = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)(\[[@*]\])?\}?$")


@dataclass(frozen=True)
class Word:
    text: str
    line: int
    splat: str | None = None
    """The variable name when the whole word is one expansion ($X, "${X[@]}"): it may stand for several words."""
    quoted: bool = False
    literal: bool = False
    """Written in single quotes: the shell that reads this word expands nothing in it."""
    deferred: tuple[str, ...] = ()
    """Variables written \\$NAME inside double quotes: left for the shell the word is handed to."""


@dataclass
class Command:
    words: list[Word]
    assignments: dict[str, Word] = field(default_factory=dict)
    """VAR=value before the command, a bare VAR=value statement, `export`/`declare VAR=value`, `: ${VAR:=value}`."""
    arrays: dict[str, list[Word]] = field(default_factory=dict)
    """NAME=(...) / declare -a NAME=(...): the elements, each with its own line."""
    heredoc: Word | None = None
    """The body of a `<<EOF` given to this command, with the line it starts on."""
    defines: tuple[str, list[Command]] | None = None
    """A function definition `name() { ... }`: its name and the commands of its body (run where it is called)."""
    conditional: bool = False
    """Inside an if / case, or after && / ||: it runs on some runs (or some nodes) only."""
    substituted: bool = False
    """Inside `$(...)`: it runs, in a subshell whose variables and functions do not outlive it."""
    writes: str | None = None
    """The file its output is written to (`cat > run.sh <<EOF`, `echo "..." >> job.sh`), as written."""
    appends: bool = False
    """`>>`: its output is added to the end of that file."""

    @property
    def line(self) -> int:
        if self.words:
            return self.words[0].line
        if self.defines is not None and self.defines[1]:
            return self.defines[1][0].line
        lines = [w.line for w in self.assignments.values()] + [ws[0].line for ws in self.arrays.values() if ws]
        return min(lines, default=0)

    def texts(self) -> list[str]:
        return [w.text for w in self.words]


class Functions(dict[str, list[Command]]):
    """The script's functions by name, and the names some command has called."""

    def __init__(self) -> None:
        super().__init__()
        self.called: set[str] = set()

    def call(self, name: str, args: list[str] | None = None) -> list[Command] | None:
        """The body bash runs for `name ARGS...`, with $1..$9 (and "$@") of the body read as those arguments."""
        body = self.get(name)
        if body is not None:
            self.called.add(name)
        return [_bound(cmd, args) for cmd in body] if body is not None and args else body


_POSITIONAL = re.compile(r"\$(?:([1-9@*])|\{([1-9@*])(?::?-([^}]*))?\})")
"""$1, ${1}, ${1:-default}, $@, ${@}."""


def _bound(cmd: Command, args: list[str]) -> Command:
    """A function's command with its positional parameters filled in from the call's arguments."""

    def fill(w: Word) -> Word:
        def one(m: re.Match[str]) -> str:
            k, default = m.group(1) or m.group(2), m.group(3)
            if k in "@*":
                return " ".join(args)
            given = args[int(k) - 1] if int(k) <= len(args) else ""
            return given or (default.strip("\"'") if default is not None else "")

        text = _POSITIONAL.sub(one, w.text)
        return w if text == w.text else Word(text, w.line, w.splat, w.quoted, w.literal, w.deferred)

    return Command(
        [fill(w) for w in cmd.words],
        {k: fill(w) for k, w in cmd.assignments.items()},
        {k: [fill(w) for w in ws] for k, ws in cmd.arrays.items()},
        cmd.heredoc,
        cmd.defines,
        cmd.conditional,
        cmd.substituted,
        cmd.writes,
        cmd.appends,
    )


def _written(redirect: Any) -> tuple[str, bool] | None:
    """The file a `>` / `>>` redirect writes, and whether it appends."""
    ops = [c.text for c in redirect.children if not c.is_named]
    target = redirect.child_by_field_name("destination")
    if target is None or not any(op in (b">", b">>", b">|") for op in ops):
        return None
    return word_text(target), b">>" in ops


class Commands(list):  # type: ignore[type-arg]
    truncated_at: int | None = None
    """The line where reading stopped after MAX_COMMANDS commands, else None."""


@functools.cache
def _parser() -> Any:
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)


_NAMES = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def filled(word: Word, text: str) -> Word:
    """The word with its variables filled in from the script (`text`). Variables that arrive inside a
    value are not expanded again by this shell: they are deferred to the shell the word is handed to."""
    introduced = set(_NAMES.findall(text)) - set(_NAMES.findall(word.text))
    deferred = tuple(sorted(set(word.deferred) | introduced))
    return Word(text, word.line, word.splat, word.quoted, word.literal, deferred)


def word_text(node: Any) -> str:
    """The word as the command receives it, expansions left as written, quotes removed."""
    raw: str = node.text.decode("utf-8", "replace")
    kind = node.type
    if kind == "raw_string":
        return raw[1:-1]
    if kind == "ansi_c_string":
        return raw[2:-1]
    if kind == "string":
        return _unescape(raw[1:-1]) if raw.endswith('"') and len(raw) >= 2 else _unescape(raw.lstrip('"'))
    if kind == "concatenation":
        return "".join(word_text(c) for c in node.children)
    if kind == "word":
        return _unescape(raw)
    return raw  # expansions, command substitutions, numbers: as written


def _deferred(node: Any) -> list[str]:
    """Variables this shell leaves alone in a word: all of a single-quoted part, \\$NAME in a double-quoted one."""
    raw: str = node.text.decode("utf-8", "replace")
    if node.type == "raw_string":
        return _NAMES.findall(raw)
    if node.type == "string":
        return re.findall(r"\\\$\{?([A-Za-z_][A-Za-z0-9_]*)", raw)
    if node.type == "concatenation":
        return [name for child in node.children for name in _deferred(child)]
    return []


def _word(node: Any, first_line: int) -> Word:
    text = word_text(node)
    raw: str = node.text.decode("utf-8", "replace")
    inner = raw[1:-1] if node.type == "string" and len(raw) >= 2 else raw
    m = _SPLAT.match(inner)
    line = node.start_point[0] + first_line
    splat = m.group(1) if m else None
    deferred = tuple(_deferred(node))
    return Word(
        text, line, splat=splat, quoted=node.type == "string", literal=node.type == "raw_string", deferred=deferred
    )


_VALUE_NODES = {
    "word",
    "string",
    "raw_string",
    "ansi_c_string",
    "concatenation",
    "simple_expansion",
    "expansion",
    "command_substitution",
    "number",
    "arithmetic_expansion",
    "process_substitution",
    "translated_string",
}
_DEFAULT_ASSIGN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?=([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")
"""`${X:=value}`, the value itself possibly one expansion deep (`${X:=${1:-/data}}`)."""


class _Full(Exception):
    """MAX_COMMANDS reached: stop walking the tree."""


class _Reader:
    def __init__(self, first_line: int, substitutions: bool = False) -> None:
        self.first_line = first_line
        self.read_substitutions = substitutions
        """Whether the commands inside `$(...)` are read (`CID=$(docker run -d ...)` starts a container)."""
        self.substituted = 0
        """How many `$(...)` enclose the node being read."""
        self.out = Commands()
        self.total = 0
        """Commands kept so far, function bodies included."""
        self.full_at: int | None = None
        self.branches = 0
        """How many if / case / && / || branches enclose the node being read."""

    def add(self, cmd: Command) -> None:
        if self.total >= MAX_COMMANDS:
            self.full_at = cmd.line
            raise _Full
        self.total += 1
        cmd.conditional = self.branches > 0
        cmd.substituted = self.substituted > 0
        self.out.append(cmd)

    def substitutions(self, node: Any) -> None:
        """The commands inside the `$(...)` of a command's words or an assignment's value: bash runs them
        before the command itself."""
        if not self.read_substitutions:
            return
        # Found with a stack of our own, in source order: a word can nest deeply, and the visit of each
        # substitution is the only recursion.
        stack = list(reversed(node.children))
        while stack:
            c = stack.pop()
            if c.type == "command_substitution":
                self.substituted += 1
                try:
                    for inner in c.children:
                        self.visit(inner)
                finally:
                    self.substituted -= 1
            elif c.type not in ("heredoc_body", "comment"):
                stack += reversed(c.children)

    def branch(self, node: Any) -> bool:
        """if / case bodies, and what follows && or || in a list: read, marked as conditional."""
        after_operator = False
        for c in node.children:
            if node.type == "list" and c.type in ("&&", "||"):
                after_operator = True
                continue
            inside = node.type != "list" or after_operator
            self.branches += inside
            try:
                self.visit(c)
            finally:
                self.branches -= inside
        return True

    def assignment(self, node: Any, cmd: Command) -> None:
        name_node = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name_node is None:
            return
        name = name_node.text.decode("utf-8", "replace")
        name = name.split("[", 1)[0]
        line = node.start_point[0] + self.first_line
        if value is not None and value.type == "array":
            cmd.arrays[name] = [_word(c, self.first_line) for c in value.named_children if c.type in _VALUE_NODES]
        else:
            cmd.assignments[name] = _word(value, self.first_line) if value is not None else Word("", line)

    def visit(self, node: Any) -> None:
        # The walk into children stays here, not in a handler: one stack frame per level of nesting.
        handler = _VISITORS.get(node.type)
        if handler is None or not handler(self, node):
            for c in node.children:
                self.visit(c)

    def skip(self, node: Any) -> bool:
        """Comments, `$(...)`, `<(...)`; a heredoc body is read with its command (redirected)."""
        return True

    def bare_assignment(self, node: Any) -> bool:
        self.substitutions(node)
        cmd = Command([])
        self.assignment(node, cmd)
        self.add(cmd)
        return True

    def declaration(self, node: Any) -> bool:
        """`export` / `declare` and the like: only their VAR=value parts."""
        self.substitutions(node)
        cmd = Command([])
        for c in node.named_children:
            if c.type == "variable_assignment":
                self.assignment(c, cmd)
        if cmd.assignments or cmd.arrays:
            self.add(cmd)
        return True

    def function(self, node: Any) -> bool:
        """`name() { ... }` / `function name { ... }`: the body is kept for the places that call it."""
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name is None or body is None:
            return False
        outer, self.out = self.out, Commands()
        try:
            self.visit(body)
        finally:
            inner, self.out = self.out, outer
        self.add(Command([], defines=(name.text.decode("utf-8", "replace"), list(inner))))
        return True

    def simple_command(self, node: Any) -> bool:
        self.command(node, None)
        return True

    def redirected(self, node: Any) -> bool:
        """A command with redirections, its heredoc body kept; other bodies are walked as usual."""
        body = node.child_by_field_name("body")
        heredoc = None
        writes: tuple[str, bool] | None = None
        for c in node.children:
            if c.type == "heredoc_redirect":
                for h in c.children:
                    if h.type == "heredoc_body":
                        heredoc = Word(h.text.decode("utf-8", "replace"), h.start_point[0] + self.first_line)
                    elif h.type == "file_redirect":
                        writes = _written(h) or writes
            elif c.type == "file_redirect":
                writes = _written(c) or writes
        if body is None or body.type != "command":
            return False
        self.command(body, heredoc, writes)
        for c in node.children:
            if c is not body:
                self.visit(c)
        return True

    def command(self, node: Any, heredoc: Word | None, writes: tuple[str, bool] | None = None) -> None:
        self.substitutions(node)
        cmd = Command([], heredoc=heredoc)
        if writes is not None:
            cmd.writes, cmd.appends = writes
        for c in node.children:
            if c.type == "variable_assignment":
                self.assignment(c, cmd)
            elif c.type == "command_name":
                cmd.words += [_word(n, self.first_line) for n in c.children if n.type in _VALUE_NODES]
            elif c.type in _VALUE_NODES:
                cmd.words.append(_word(c, self.first_line))
            elif c.type == "herestring_redirect":
                continue
        if cmd.words and cmd.words[0].text == ":":
            # `: "${X:=8}"` assigns X when unset: the idiom for defaults in batch scripts.
            for w in cmd.words[1:]:
                for m in _DEFAULT_ASSIGN.finditer(w.text):
                    cmd.assignments[m.group(1)] = Word(m.group(2).strip("\"'"), w.line)
            cmd.words = []
        if cmd.words or cmd.assignments or cmd.arrays:
            self.add(cmd)


# Node type -> what _Reader.visit does with it; a handler returns False to have the node's children walked.
_VISITORS: dict[str, Callable[[_Reader, Any], bool]] = {
    "comment": _Reader.skip,
    "command_substitution": _Reader.skip,
    "process_substitution": _Reader.skip,
    "heredoc_body": _Reader.skip,
    "variable_assignment": _Reader.bare_assignment,
    "declaration_command": _Reader.declaration,
    "command": _Reader.simple_command,
    "redirected_statement": _Reader.redirected,
    "function_definition": _Reader.function,
    "if_statement": _Reader.branch,
    "case_statement": _Reader.branch,
    "list": _Reader.branch,
}


def commands(text: str, first_line: int = 1, substitutions: bool = False) -> Commands:
    """Every simple command and assignment of the script, in source order (with `substitutions`, the
    commands inside `$(...)` too, marked, before the command they are part of). Never raises."""
    reader = _Reader(first_line, substitutions)
    if len(text) > MAX_TEXT:
        reader.out.truncated_at = first_line
        return reader.out
    tree = _parser().parse(text.encode("utf-8", "surrogatepass"))
    stack = [tree.root_node]
    # Iterative over the top level, recursive below: real scripts nest a few levels; a pathological
    # one is bounded by tree-sitter's own depth and MAX_TEXT.
    try:
        for node in stack:
            reader.visit(node)
    except _Full:
        reader.out.truncated_at = reader.full_at
    except RecursionError:
        reader.out.truncated_at = reader.out[-1].line if reader.out else first_line
    return reader.out


@dataclass(frozen=True)
class SyntaxProblem:
    line: int
    message: str


_BASH_ERROR = re.compile(r"line (\d+): (.*)$")


def _bash_n(bash: str, text: str) -> tuple[int, str] | None:
    """(exit status, stderr) of `bash -n` on the text; None when bash cannot be run in time."""
    try:
        done = subprocess.run(
            [bash, "-n", "/dev/stdin"],
            input=text.encode("utf-8", "surrogatepass"),
            capture_output=True,
            timeout=SYNTAX_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.returncode, done.stderr.decode("utf-8", "replace")


_OPEN_QUOTE = "unexpected EOF while looking for matching"
MAX_QUOTE_SEARCH = 100
"""bash -n runs spent looking for the line that opened an unclosed quote (each takes milliseconds)."""
MAX_QUOTE_SEARCH_BYTES = 256 * 1024


def _opening_line(bash: str, lines: list[str], eof_line: int) -> int | None:
    """bash names the end of the file for an unclosed quote; the quote opened on the first line from
    which every longer prefix of the script is still inside it."""
    last = len(lines)
    for k in range(last - 1, max(0, last - MAX_QUOTE_SEARCH), -1):
        done = _bash_n(bash, "\n".join(lines[:k]) + "\n")
        if done is None:
            return None
        if done[0] == 0 or _OPEN_QUOTE not in done[1]:
            return k + 1 if k + 1 < eof_line else None
    return None


def bash_syntax(text: str) -> SyntaxProblem | None:
    """`bash -n` on the text: the first syntax error bash reports, None when it parses (or no bash here)."""
    bash = shutil.which("bash")
    if bash is None:
        return None
    done = _bash_n(bash, text)
    if done is None or done[0] == 0:
        return None
    for raw in done[1].splitlines():
        m = _BASH_ERROR.search(raw)
        if m:
            line, message = int(m.group(1)), m.group(2).strip()
            if _OPEN_QUOTE in message and len(text) <= MAX_QUOTE_SEARCH_BYTES:
                opened = _opening_line(bash, text.split("\n"), line)
                if opened is not None:
                    return SyntaxProblem(
                        opened,
                        f"{message}: bash reads the quote on line {opened} as opening a string that never closes "
                        "(if that line looks right, a quote earlier in the script is unbalanced and has put "
                        "the ones after it out of step)",
                    )
            return SyntaxProblem(line, message)
    first = done[1].strip().splitlines()
    return SyntaxProblem(1, first[0] if first else f"bash -n exited {done[0]}")
