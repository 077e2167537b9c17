"""One SHA-256 and HMAC-SHA256 for kindling: job signatures (jobsig), SigV4 (aws.signing)
and every digest go through kindling.core.digest, which matches the standard library's."""

import ast
import hashlib
import hmac
from pathlib import Path

import pytest
from kindling.core import digest, jobsig
from kindling.drivers.aws import signing

PACKAGE = Path(digest.__file__).parent


@pytest.mark.parametrize("key_bytes", [0, 1, 32, 63, 64, 65, 200])
def test_hmac_sha256_is_the_standard_hmac_for_every_key_length(key_bytes):
    key = bytes(range(256))[:key_bytes] * 1
    parts = [b"kindling-job-v1\n", b"", b"k1\nsqs:1:q\n", bytes(range(256)) * 3]
    assert digest.hmac_sha256(key, *parts) == hmac.new(key, b"".join(parts), hashlib.sha256).digest()


def test_sha256_hex_is_the_standard_digest_of_text_and_bytes():
    assert digest.sha256_hex("job-1") == hashlib.sha256(b"job-1").hexdigest()
    assert digest.sha256_hex(b"\x00\xff") == hashlib.sha256(b"\x00\xff").hexdigest()
    assert digest.sha256_hex("\udc80") == hashlib.sha256("\udc80".encode("utf-8", "surrogatepass")).hexdigest()


def test_job_signatures_and_sigv4_use_the_one_hmac():
    key = b"k" * 32
    expected = hmac.new(key, b"kindling-job-v1\nk1\nsqs:1:q\n{}", hashlib.sha256).digest()
    assert jobsig.mac(key, "k1", "sqs:1:q", b"{}") == expected
    assert signing._hmac(key, "msg") == hmac.new(key, b"msg", hashlib.sha256).digest()
    assert jobsig.mac.__globals__["hmac_sha256"] is digest.hmac_sha256
    assert signing._hmac.__globals__["hmac_sha256"] is digest.hmac_sha256


def _imports_sha2(path: Path) -> bool:
    return any(isinstance(n, ast.ImportFrom) and n.module == "_sha2" for n in ast.walk(ast.parse(path.read_text())))


def test_the_sha2_fallback_is_written_once():
    assert [str(p.relative_to(PACKAGE)) for p in sorted(PACKAGE.rglob("*.py")) if _imports_sha2(p)] == ["digest.py"]
