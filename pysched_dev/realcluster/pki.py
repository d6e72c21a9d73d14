"""The real cluster's certificates and keys (the ``cryptography`` package; no openssl CLI).

One CA signs everything: the API server's serving certificate (its Service ClusterIP, the node
address, loopback and the ``kubernetes.default.svc`` names), the kubelet's serving and client
certificates (``system:node:<name>`` in ``system:nodes``, so the Node authorizer and NodeRestriction
apply), the API server's client certificate for kubelets, and one client certificate per
component (the CN is the user, each O a group: how Kubernetes reads a certificate). The
service-account key pair signs the pods' tokens. Everything is valid for a week.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=7)


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    path.write_bytes(data)
    path.chmod(0o600 if private else 0o644)
    return path


class Pki:
    """A CA in ``directory`` (``ca.crt``, ``ca.key``) and the certificates it issues there."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.UTC)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pysched-real-cluster-ca")])
        self._ca_cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(self._ca_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self._ca_key, hashes.SHA256()))
        self.ca_crt = _write(directory / "ca.crt", self._ca_cert.public_bytes(serialization.Encoding.PEM))
        self.ca_key = _write(directory / "ca.key", _pem_key(self._ca_key), private=True)

    def issue(self, name: str, *, cn: str | None = None, groups: Sequence[str] = (), client: bool = True,
              server_names: Sequence[str] = ()) -> tuple[Path, Path]:
        """``<name>.crt`` and ``<name>.key``: a client certificate for user ``cn`` (default ``name``)
        in ``groups``, and/or a serving one when ``server_names`` (DNS names and IP addresses) is set."""
        now = datetime.datetime.now(datetime.UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
                            + [x509.NameAttribute(NameOID.COMMON_NAME, cn or name)])
        usages = []
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(self._ca_cert.subject)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY))
        if server_names:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
            b = b.add_extension(x509.SubjectAlternativeName([_san(n) for n in server_names]), critical=False)
        b = b.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        cert = b.sign(self._ca_key, hashes.SHA256())
        return (_write(self.dir / f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM)),
                _write(self.dir / f"{name}.key", _pem_key(key), private=True))

    def service_account_keys(self) -> tuple[Path, Path]:
        """``sa.key`` (signs service-account tokens) and ``sa.pub`` (verifies them)."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pub = key.public_key().public_bytes(serialization.Encoding.PEM,
                                            serialization.PublicFormat.SubjectPublicKeyInfo)
        return (_write(self.dir / "sa.key", _pem_key(key), private=True), _write(self.dir / "sa.pub", pub))


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def kubeconfig(path: Path, *, server: str, ca: Path, user: str, token: str | None = None,
               cert: tuple[Path, Path] | None = None) -> Path:
    """A kubeconfig for ``server`` authenticating with a bearer ``token`` or a client ``cert``."""
    from pysched_dev.devcluster import write_kubeconfig

    return write_kubeconfig(path, server=server, ca_file=ca, token=token, user=user, cert=cert)
