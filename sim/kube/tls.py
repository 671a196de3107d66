"""The API server's TLS identity: a self-signed certificate for the loopback addresses.

kubectl (client-go) sends a kubeconfig's credentials only over TLS: against an `http://` server it
sends no `Authorization` header at all, so every request would be anonymous and refused. sim therefore
serves the API over HTTPS too, with a certificate made at start-up (an EC P-256 key, valid for
127.0.0.1, ::1 and localhost) that the kubeconfigs carry as their `certificate-authority-data`.
"""

from __future__ import annotations

import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class ServingCertificate:
    """A certificate and its key, PEM-encoded. The certificate is its own CA."""

    cert_pem: bytes
    key_pem: bytes

    def server_context(self) -> ssl.SSLContext:
        """A server-side context serving this certificate (HTTP/1.1 only: no ALPN, so no HTTP/2)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        with tempfile.TemporaryDirectory() as tmp:
            cert_file, key_file = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
            cert_file.write_bytes(self.cert_pem)
            key_file.write_bytes(self.key_pem)
            context.load_cert_chain(cert_file, key_file)
        return context


def self_signed(common_name: str = "sim-kube-apiserver", days: int = 365) -> ServingCertificate:
    """A new key and a self-signed CA certificate for it, valid for the loopback names."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.now(UTC)
    san = x509.SubjectAlternativeName([
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(san, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, key_encipherment=False,
                          content_commitment=False, data_encipherment=False, key_agreement=False,
                          crl_sign=False, encipher_only=False, decipher_only=False),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ServingCertificate(cert.public_bytes(serialization.Encoding.PEM), key_pem)
