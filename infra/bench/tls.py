"""HTTPS on loopback for the cold-start TLS variant: a throwaway CA, a TLS proxy, a CA bundle.

:func:`make_pki` writes a CA and a server certificate for ``localhost`` and 127.0.0.1
(signed by the CA, valid for a day, with the extensions Python 3.13's strict X.509
checks want) and a bundle of the system CAs plus the test CA, so that a child loading
the bundle pays what loading the system bundle costs on Lambda. The children trust it
through SSL_CERT_FILE (ssl, so kindling) and AWS_CA_BUNDLE (botocore); verification is
never turned off.

Run as a script, this module is the proxy: it terminates TLS on 127.0.0.1:<port> and
forwards the bytes to an HTTP upstream (LocalStack)::

    python tls.py --cert cert.pem --key key.pem --port 8443 --upstream 127.0.0.1:4566
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import ipaddress
import socket
import ssl
import sys
import threading
from pathlib import Path

SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")


def system_bundle() -> Path:
    """The system CA bundle (what ssl's default verify paths name, else a known location)."""
    for p in (ssl.get_default_verify_paths().cafile, *SYSTEM_BUNDLES):
        if p and Path(p).is_file():
            return Path(p)
    raise FileNotFoundError("no system CA bundle found")


def make_pki(out: Path) -> dict[str, Path]:
    """CA, server cert and key for localhost/127.0.0.1, and bundle = system CAs + the CA, in ``out``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    valid = {"not_valid_before": now - datetime.timedelta(minutes=5),
             "not_valid_after": now + datetime.timedelta(days=1)}
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kindling bench throwaway CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(valid["not_valid_before"]).not_valid_after(valid["not_valid_after"])
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(valid["not_valid_before"]).not_valid_after(valid["not_valid_after"])
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    paths = {"ca": out / "ca.pem", "cert": out / "cert.pem", "key": out / "key.pem", "bundle": out / "bundle.pem"}
    paths["ca"].write_bytes(ca.public_bytes(pem))
    paths["cert"].write_bytes(cert.public_bytes(pem))
    paths["key"].write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    system = system_bundle().read_bytes()
    paths["bundle"].write_bytes(system.rstrip(b"\n") + b"\n" + ca.public_bytes(pem))
    return paths


# ----------------------------------------------------------------------------- the proxy

def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _serve_one(ctx: ssl.SSLContext, raw: socket.socket, upstream: tuple[str, int]) -> None:
    try:
        client = ctx.wrap_socket(raw, server_side=True)
    except (OSError, ssl.SSLError) as exc:  # a client that rejected our certificate, say
        print(f"tls proxy: handshake failed: {exc}", file=sys.stderr, flush=True)
        raw.close()
        return
    try:
        up = socket.create_connection(upstream)
    except OSError:
        client.close()
        return
    for s in (client, up):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t = threading.Thread(target=_pump, args=(up, client), daemon=True)
    t.start()
    _pump(client, up)
    t.join()
    client.close()
    up.close()


def main() -> int:
    ap = argparse.ArgumentParser(description="TLS-terminating proxy on 127.0.0.1 for the cold-start TLS variant")
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--upstream", required=True, help="host:port of the plain-HTTP endpoint")
    ns = ap.parse_args()
    host, port = ns.upstream.rsplit(":", 1)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(ns.cert, ns.key)
    srv = socket.create_server(("127.0.0.1", ns.port), backlog=128)
    while True:
        raw, _ = srv.accept()
        threading.Thread(target=_serve_one, args=(ctx, raw, (host, int(port))), daemon=True).start()


if __name__ == "__main__":
    raise SystemExit(main())
