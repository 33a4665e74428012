"""Serialising the translators' plain data: YAML documents and shell command lines."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        # A value two containers share (their environment) is written out in each: no &anchors in a config.
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def yaml_documents(docs: Sequence[Mapping[str, object]], header: str) -> str:
    """The documents as YAML, in the key order the translators built them, under a comment header."""
    body = "---\n".join(
        yaml.dump(d, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000) for d in docs
    )
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return comment + body


class Expand(str):
    """A word the translator means the shell to expand (`${NODE_RANK}`, `$SLURM_NODEID`).

    Everything else, the user's script arguments above all, is quoted literally."""


_Dumper.add_representer(Expand, _str)


def shell_word(token: str) -> str:
    """Quote one argv element; an Expand stays expandable inside double quotes."""
    if isinstance(token, Expand):
        escaped = token.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")
        return f'"{escaped}"'
    return shlex.quote(token)


def shell_join(argv: Sequence[str]) -> str:
    return " ".join(shell_word(t) for t in argv)


def shell_lines(groups: Sequence[Sequence[str]], indent: str = "    ") -> str:
    """One group of words per line, joined by backslash-newlines (one decision per line)."""
    return f" \\\n{indent}".join(shell_join(g) for g in groups if g)
