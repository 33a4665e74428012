"""The tool's own fatal errors. Each becomes one line on stderr and an exit code."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130


class DoctorError(Exception):
    """An error the user can act on: bad flag, unreadable or malformed input. Exit 2."""

    exit_code = EXIT_USAGE


class UsageError(DoctorError):
    """A flag or argument that makes no sense."""


class InputError(DoctorError):
    """A file that cannot be read or parsed; nothing of the user's is modified."""
