"""kindling's own S3 client, counting the objects it is asked for: a refused payload pointer
must be refused before any read."""

from __future__ import annotations

from kindling.drivers.aws.s3 import S3Client


class CountingS3(S3Client):
    """:class:`S3Client` on ``endpoint``, noting ``(bucket, key)`` of every GET in ``reads``."""

    def __init__(self, endpoint: str):
        super().__init__(endpoint=endpoint)
        self.reads: list[tuple[str, str]] = []

    def get_object(self, bucket, key, **kwargs):
        self.reads.append((bucket, key))
        return super().get_object(bucket, key, **kwargs)
