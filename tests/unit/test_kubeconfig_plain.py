"""Plain kubeconfigs are read without the kubernetes package, to the same Credentials it gives;
anything else (exec plugins, auth providers, proxies) still goes through it."""

import base64
from pathlib import Path

import pytest
import yaml

from pysched.client import auth


def _write(tmp_path: Path, cluster: dict, user: dict, *, extra_context: dict | None = None,
           context: str = "c1") -> Path:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": context,
           "clusters": [{"name": "k", "cluster": cluster}, {"name": "other", "cluster": {"server": "https://o:1"}}],
           "users": [{"name": "u", "user": user}],
           "contexts": [{"name": "c1", "context": {"cluster": "k", "user": "u", **(extra_context or {})}},
                        {"name": "c2", "context": {"cluster": "other", "user": "u"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def _official(path: Path, context: str | None = None) -> auth.Credentials:
    """What the kubernetes package's loader gives for the same file."""
    original = auth._plain_kubeconfig
    auth._plain_kubeconfig = lambda p, c: None
    try:
        return auth.load_kubeconfig(path, context)
    finally:
        auth._plain_kubeconfig = original


def _same(a: auth.Credentials, b: auth.Credentials) -> None:
    assert a.server == b.server
    assert a.insecure == b.insecure
    assert a.bearer() == ((b.bearer() or "").strip() or None)  # client-go trims a tokenFile; so do we
    for f in ("ca_file", "cert_file", "key_file"):
        x, y = getattr(a, f), getattr(b, f)
        assert (x is None) == (y is None), f
        if x is not None:
            assert Path(x).read_bytes() == Path(y).read_bytes(), f


PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize("shape", ["inline", "files", "token", "token-file", "insecure"])
def test_plain_kubeconfigs_read_like_the_kubernetes_package(tmp_path, shape):
    (tmp_path / "ca.pem").write_bytes(PEM)
    (tmp_path / "c.pem").write_bytes(PEM + b"client")
    (tmp_path / "k.pem").write_bytes(b"key")
    (tmp_path / "tok").write_text("from-file\n")
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    cluster = {"server": "https://127.0.0.1:6443/", "certificate-authority-data": b64(PEM)}
    user: dict = {"client-certificate-data": b64(PEM + b"c"), "client-key-data": b64(b"k")}
    if shape == "files":
        cluster = {"server": "https://127.0.0.1:6443", "certificate-authority": "ca.pem"}
        user = {"client-certificate": "c.pem", "client-key": "k.pem"}
    elif shape == "token":
        user = {"token": "abc"}
    elif shape == "token-file":
        user = {"tokenFile": "tok"}
    elif shape == "insecure":
        cluster = {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True}
        user = {"token": "abc"}
    path = _write(tmp_path, cluster, user)
    plain = auth._plain_kubeconfig(path, None)
    assert plain is not None
    _same(plain, _official(path))
    assert auth.load_kubeconfig(path).server == "https://127.0.0.1:6443"


def test_context_is_honoured(tmp_path):
    path = _write(tmp_path, {"server": "https://a:1"}, {"token": "t"})
    assert auth.load_kubeconfig(path, "c2").server == "https://o:1"
    with pytest.raises(auth.CredentialsError, match="no context named 'nope'"):
        auth._plain_kubeconfig(path, "nope")


@pytest.mark.parametrize("user,cluster,ctx", [
    ({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "true"}}, {}, {}),
    ({"auth-provider": {"name": "oidc"}}, {}, {}),
    ({"token": "t"}, {"proxy-url": "http://proxy:3128"}, {}),
    ({"token": "t", "as": "someone"}, {}, {}),
])
def test_anything_else_goes_to_the_kubernetes_package(tmp_path, user, cluster, ctx):
    path = _write(tmp_path, {"server": "https://a:1", **cluster}, user, extra_context=ctx)
    assert auth._plain_kubeconfig(path, None) is None


def test_two_kubeconfigs_keep_their_own_embedded_files(tmp_path):
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = auth.load_kubeconfig(_write(tmp_path / "a", {"server": "https://a:1", "certificate-authority-data": b64(PEM)},
                                    {"token": "t"}))
    b = auth.load_kubeconfig(_write(tmp_path / "b", {"server": "https://b:1",
                                                     "certificate-authority-data": b64(PEM + b"other")},
                                    {"token": "t"}))
    assert a.ca_file != b.ca_file
    assert Path(a.ca_file).read_bytes() == PEM and Path(b.ca_file).read_bytes() == PEM + b"other"


def test_bad_references_name_the_field(tmp_path):
    path = _write(tmp_path, {"server": "https://a:1", "certificate-authority": "missing.pem"}, {"token": "t"})
    with pytest.raises(auth.CredentialsError, match=r"cluster.certificate-authority: file .*missing.pem does not"):
        auth.load_kubeconfig(path)
    path = _write(tmp_path, {"server": "https://a:1"}, {"client-key-data": "not base64!"})
    with pytest.raises(auth.CredentialsError, match="user.client-key-data: not valid base64"):
        auth.load_kubeconfig(path)
