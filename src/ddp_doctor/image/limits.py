"""The bounds every image read runs under: bytes, bytes per entry, entries, kept content."""

from __future__ import annotations

from dataclasses import dataclass

GiB = 1 << 30
MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    max_total_bytes: int = 256 * GiB
    """Uncompressed layer bytes over the whole image; a decompression bomb stops here at the latest."""
    max_entry_bytes: int = 64 * GiB
    """Declared size of one member (a layer blob or a file in a layer)."""
    max_entries: int = 2_000_000
    """Entries across all layers; the in-memory tree costs roughly 150 bytes per entry."""
    max_ratio: int = 1000
    """Uncompressed : compressed bytes beyond `ratio_grace_bytes`; real layers are 2-10:1."""
    ratio_grace_bytes: int = 256 * MiB
    max_kept_bytes: int = 1 * MiB
    """Content kept for one small file the audit reads (version.py, METADATA, a shebang)."""
    max_kept_total_bytes: int = 64 * MiB
    max_metadata_bytes: int = 4 * MiB
    """manifest.json, index.json, a manifest or a config blob."""
    verify_diff_ids: bool = False
    """Also hash the uncompressed bytes of layers whose blob digest was verified (one more sha256 pass)."""
