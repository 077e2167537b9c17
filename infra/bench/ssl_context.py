"""Which SSL client context is cheapest to build? Each way in a fresh ``python -S``, interleaved.

    python infra/bench/ssl_context.py [--reps 15] [--cafile bundle.pem]

Prints the median and min ms of building the context (the ssl import excluded) for
``ssl.create_default_context()``, ``SSLContext(PROTOCOL_TLS_CLIENT)`` +
``load_verify_locations(SSL_CERT_FILE or the default cafile)`` and
``SSLContext(PROTOCOL_TLS_CLIENT)`` + ``set_default_verify_paths()``. All three verify
the server and its host name; the bundle's parse is most of each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

WAYS = {
    "create_default_context()": "c = ssl.create_default_context()",
    "SSLContext + load_verify_locations(cafile)": (
        "c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\n"
        "c.load_verify_locations(os.environ.get('SSL_CERT_FILE') or ssl.get_default_verify_paths().cafile)"),
    "SSLContext + set_default_verify_paths()": (
        "c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\nc.set_default_verify_paths()"),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--cafile", help="SSL_CERT_FILE for the children (default: as inherited)")
    ns = ap.parse_args()
    env = dict(os.environ, **({"SSL_CERT_FILE": ns.cafile} if ns.cafile else {}))
    samples: dict[str, list[float]] = {k: [] for k in WAYS}
    for _ in range(ns.reps):
        for name, code in WAYS.items():
            prog = (f"import os, ssl, time\nt0 = time.perf_counter()\n{code}\n"
                    "assert c.verify_mode == ssl.CERT_REQUIRED and c.check_hostname\n"
                    "print((time.perf_counter() - t0) * 1000, c.cert_store_stats()['x509_ca'])")
            out = subprocess.run([sys.executable, "-S", "-c", prog], env=env, capture_output=True, text=True,
                                 check=True).stdout.split()
            samples[name].append(float(out[0]))
            cas = out[1]
    print(f"SSL_CERT_FILE={env.get('SSL_CERT_FILE', '(unset)')}, {cas} CA certificates, {ssl_version()}, "
          f"{ns.reps} fresh processes each, interleaved")
    for name, xs in samples.items():
        print(f"  {name}: median {statistics.median(xs):.1f} ms, min {min(xs):.1f}")
    return 0


def ssl_version() -> str:
    import ssl

    return ssl.OPENSSL_VERSION


if __name__ == "__main__":
    raise SystemExit(main())
