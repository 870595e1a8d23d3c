"""Per-run secrets: TSIG keys and the XoT certificate authority, written with mode 0600.

Nothing here is ever logged; configs that embed a secret are written 0600 as well, through
`write_private`.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import secrets as random_source
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from harness.xfr import TsigKey

# Key length per TSIG algorithm: the hash's output size (RFC 8945 section 6).
_TSIG_BYTES = {
    "hmac-sha1": 20,
    "hmac-sha224": 28,
    "hmac-sha256": 32,
    "hmac-sha384": 48,
    "hmac-sha512": 64,
}


def write_private(path: Path, data: bytes | str) -> Path:
    """Create a file readable by its owner only, atomically (no moment with wider mode)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, raw)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


def write_private_text(path: Path, chunks: Iterable[str]) -> Path:
    """write_private() of text given in pieces, written as they come: a config rendered for
    100 k zones is some 40 MB, whose whole string and its pieces together held 76 MB."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
        for chunk in chunks:
            out.write(chunk)
    os.replace(tmp, path)
    return path


def new_tsig(name: str = "xfrbench-xfr.", algorithm: str = "hmac-sha256") -> TsigKey:
    """A fresh random key of the algorithm's full length."""
    raw = random_source.token_bytes(_TSIG_BYTES[algorithm])
    return TsigKey(name, algorithm, base64.b64encode(raw).decode())


@dataclass(frozen=True)
class TlsFiles:
    """A CA and one server certificate for XoT; the secondary authenticates the primary."""

    ca_cert: Path
    cert: Path
    key: Path
    hostname: str  # the name in the certificate's SAN, which the secondary checks

    @property
    def cert_pin(self) -> str:
        """Base64 SHA-256 of the server certificate's SubjectPublicKeyInfo (RFC 7469 pin):
        how Knot's `cert-key` authenticates a remote."""
        return public_key_pin(self.cert.read_bytes())


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def new_tls(folder: Path, hostname: str, address: str) -> TlsFiles:
    """A fresh CA (P-256) and a server certificate with SAN hostname and IP, valid one day."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("xfrbench run CA"))
        .issuer_name(_name("xfrbench run CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hostname))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(hostname), x509.IPAddress(ipaddress.ip_address(address))]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    files = TlsFiles(folder / "ca.pem", folder / "server.pem", folder / "server.key", hostname)
    write_private(files.ca_cert, ca_cert.public_bytes(pem))
    write_private(files.cert, cert.public_bytes(pem))
    write_private(
        files.key,
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
    return files


def public_key_pin(cert_pem: bytes) -> str:
    import base64
    import hashlib

    from cryptography.hazmat.primitives import serialization

    spki = (
        x509.load_pem_x509_certificate(cert_pem)
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()
