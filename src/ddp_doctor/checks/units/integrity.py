"""Image integrity: the layers and config match the digests the image records for them."""

from __future__ import annotations

from ddp_doctor.checks.facts.image_only import StoredImageFacts
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status
from ddp_doctor.words import human_bytes, plural


def judge(f: StoredImageFacts) -> Finding:
    """Passes when every blob the image's manifest names matched its sha256 digest while it was read;
    a SKIP for a format that carries no digests (a rootfs directory or tar).

    Why: a truncated download or a tampered layer reads as a different filesystem; the facts the
    other checks judge would not be the image's.
    """
    if not f.verified_blobs:
        return skip(f"{f.format}: {f.note or 'no digests to verify'}")
    layers, size, entries = f.layer_count or 0, f.uncompressed_bytes or 0, f.entries or 0
    return Finding(
        Status.PASS,
        f"{plural(f.verified_blobs, 'blob')} match their sha256 digests; {plural(layers, 'layer')}, "
        f"{human_bytes(size)} uncompressed, {plural(entries, 'entry', 'entries')}",
        observed={"format": f.format, "layers": f.layer_count},
        metrics={"size_bytes": size, "layers_count": layers},
    )


CHECK = Check(
    name="integrity",
    title="Image integrity",
    facts=StoredImageFacts,
    judge=judge,
    ids={"image": "image.integrity"},
    order=4,
)
