"""Shell text -> simple commands (lists of words with their line), via shlex.

Enough shell for launch scripts: backslash continuations, quotes spanning lines, comments,
`;` `&&` `||` `|` `&` separators, leading `VAR=value` assignments, `export`, `exec`, `sudo`.
Anything shlex cannot read (an unclosed quote at the end of the file) degrades to a
whitespace split of that line; nothing here raises on odd input.
"""

from __future__ import annotations

import bisect
import io
import re
import shlex
from dataclasses import dataclass, field

SEPARATORS = {";", "&&", "||", "|", "&", "|&", ";;", "(", ")", "{", "}"}
PREFIXES = {"exec", "sudo", "time", "nohup", "env", "command", "then", "do", "else", "!"}
MAX_JOINED_LINES = 200


@dataclass(frozen=True)
class Word:
    text: str
    line: int


@dataclass
class Command:
    words: list[Word]
    assignments: dict[str, Word] = field(default_factory=dict)
    """VAR=value words before the command, and `export VAR=value`."""

    @property
    def line(self) -> int:
        return self.words[0].line if self.words else min((w.line for w in self.assignments.values()), default=0)

    def texts(self) -> list[str]:
        return [w.text for w in self.words]


# Quoted strings, escapes and comments, left to right; a lone quote left over is an open quote.
_QUOTING = re.compile(r"""\\.|'[^']*'|"(?:\\.|[^"\\])*"|(?:^|(?<=\s))#[^\n]*|['"]""", re.DOTALL)
# Only lines that can start a container or a launcher, or assign a variable, are tokenized:
# shlex is pure Python and a big script is mostly other commands.
_RELEVANT = re.compile(r"docker|podman|torchrun|torch\.distributed|ddp-doctor|srun|[A-Za-z_][A-Za-z0-9_]*=")
MAX_COMMAND_CHARS = 65536
"""A launch command longer than this is not a real one; such a line is left unread."""


def _closed(text: str) -> bool:
    return not any(m.group(0) in ("'", '"') for m in _QUOTING.finditer(text))


def logical_lines(text: str, first_line: int = 1) -> list[tuple[str, list[tuple[int, int]]]]:
    """(logical line, [(offset in it, physical line)]) with continuations and open quotes joined."""
    physical = text.split("\n")
    out: list[tuple[str, list[tuple[int, int]]]] = []
    i = 0
    while i < len(physical):
        buf, marks = physical[i], [(0, first_line + i)]
        i += 1
        joined = 0
        while i < len(physical) and joined < MAX_JOINED_LINES:
            stripped = buf.rstrip()
            continued = stripped.endswith("\\") and (len(stripped) - len(stripped.rstrip("\\"))) % 2 == 1
            if continued:
                buf = stripped[:-1] + " "
            elif _closed(buf):
                break
            else:
                buf += "\n"
            marks.append((len(buf), first_line + i))
            buf += physical[i]
            i += 1
            joined += 1
        out.append((buf, marks))
    return out


def _tokens(buf: str, marks: list[tuple[int, int]]) -> list[Word]:
    offsets = [m[0] for m in marks]

    def line_at(pos: int) -> int:
        return marks[max(0, bisect.bisect_right(offsets, pos) - 1)][1]

    stream = io.StringIO(buf)
    lex = shlex.shlex(stream, posix=True, punctuation_chars=";&|()")
    lex.whitespace_split = True
    words: list[Word] = []
    try:
        while True:
            start = stream.tell()
            token = lex.get_token()
            if token is None or token == lex.eof:
                break
            # The token starts after any whitespace skipped from `start`.
            while start < len(buf) and buf[start].isspace():
                start += 1
            words.append(Word(token, line_at(start)))
    except ValueError:  # unclosed quote: keep going with a plain split of this line
        words = []
        pos = 0
        for raw in buf.split():
            pos = buf.find(raw, pos)
            if raw.startswith("#"):
                break
            words.append(Word(raw, line_at(pos)))
            pos += len(raw)
    return words


MAX_COMMANDS = 5000
"""Command lines tokenized per text; a launch script has tens. Past this the rest is left unread."""


class Commands(list):  # type: ignore[type-arg]
    truncated_at: int | None = None
    """The line where reading stopped after MAX_COMMANDS command lines, else None."""


def commands(text: str, first_line: int = 1) -> Commands:
    out = Commands()
    read = 0
    for buf, marks in logical_lines(text, first_line):
        if len(buf) > MAX_COMMAND_CHARS or not _RELEVANT.search(buf):
            continue
        read += 1
        if read > MAX_COMMANDS:
            out.truncated_at = marks[0][1]
            break
        current: list[Word] = []
        for word in [*_tokens(buf, marks), Word(";", 0)]:
            if word.text in SEPARATORS:
                if current:
                    out.append(_command(current))
                current = []
            else:
                current.append(word)
    return out


def _command(words: list[Word]) -> Command:
    assignments: dict[str, Word] = {}
    i = 0
    while i < len(words):
        text = words[i].text
        name, eq, value = text.partition("=")
        if eq and name.isidentifier():
            assignments[name] = Word(value, words[i].line)
        elif text == "export":
            for w in words[i + 1 :]:
                n, e, v = w.text.partition("=")
                if e and n.isidentifier():
                    assignments[n] = Word(v, w.line)
            return Command([], assignments)
        elif text in PREFIXES or (text.startswith("-") and i > 0 and words[i - 1].text in ("sudo", "env")):
            pass
        else:
            break
        i += 1
    return Command(words[i:], assignments)
