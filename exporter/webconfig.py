"""``--web.config.file``: TLS, mutual TLS, basic authentication and response headers, in the
exporter-toolkit's format (the file node_exporter, blackbox_exporter and every Prometheus exporter
take, so a platform team reuses one file)::

    tls_server_config:
      cert_file: /etc/tls/tls.crt         # PEM: the server's certificate (chain)
      key_file: /etc/tls/tls.key          # PEM: its private key
      client_ca_file: /etc/tls/ca.crt     # PEM: CAs that sign client certificates (mTLS)
      client_auth_type: RequireAndVerifyClientCert
      min_version: TLS12                  # TLS10 .. TLS13; default TLS12
    basic_auth_users:
      prometheus: $2y$10$...              # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')
    http_server_config:
      headers:
        Strict-Transport-Security: max-age=31536000

TLS is Python's :mod:`ssl`; passwords are checked with ``bcrypt``. The certificate, key and client
CAs are read again when one of the files changes (Kubernetes updates a mounted Secret in place):
the next connection gets the new ones; a file that does not load then keeps the previous ones and
is logged. ``/healthz`` needs no password (kubelet probes cannot send one) but is served over TLS
like everything else. Other keys of the exporter-toolkit's format (cipher suites, curves,
``max_version``, HTTP/2, ...) are refused by name, unknown keys too: a file that does not say what
it seems to is a bad setting (exit 2).
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import ssl
import threading
from dataclasses import dataclass, field

from .files import read_small_file

log = logging.getLogger(__name__)

#: Largest web configuration file read, in bytes.
WEB_CONFIG_MAX_BYTES = 1 << 20

#: exporter-toolkit's client_auth_type values -> (ssl verify mode, a certificate is required).
CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,  # asked for; checked against client_ca_file if given
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
TLS_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
                "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_TLS_KEYS = {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version"}
_TLS_UNSUPPORTED = {"cert", "key", "client_ca", "max_version", "cipher_suites", "curve_preferences",
                    "prefer_server_cipher_suites", "client_allowed_sans"}
_HTTP_KEYS = {"headers"}
_HTTP_UNSUPPORTED = {"http2"}
#: Headers the server sets itself (exporter-toolkit refuses the same kind).
_RESERVED_HEADERS = {"authorization", "www-authenticate", "content-type", "content-length",
                     "content-encoding", "transfer-encoding", "connection", "date", "server"}
#: A bcrypt hash checked when the user is unknown, so that the answer takes as long (no user list
#: can be probed by timing). It is the hash of a random password nobody knows.
_DUMMY_HASH = b"$2b$10$PaPPs.qLGg8TfkOwZ1pX0ua4s1Oik4AbZgybJf0Pz94i5t6eICDFS"


class WebConfigError(ValueError):
    """The web configuration file cannot be used; ``str()`` says where and why in one line."""


@dataclass
class WebConfig:
    """The parsed file (see the module docstring).

    Attributes:
        path: The file.
        tls: The ``tls_server_config`` (None: plain HTTP).
        users: ``basic_auth_users``: user -> bcrypt hash (empty: no authentication).
        headers: ``http_server_config.headers``, added to every response.
    """

    path: str
    tls: TlsFiles | None = None
    users: dict[str, bytes] = field(default_factory=dict)
    headers: list[tuple[str, str]] = field(default_factory=list)

    def wrap(self, app):
        """The WSGI ``app`` behind basic authentication (every path but ``/healthz``) and with the
        configured headers on every response."""
        if not self.users and not self.headers:
            return app
        users, extra = self.users, self.headers

        def guarded(environ, start_response):
            def start(status, headers, exc_info=None):
                return start_response(status, headers + extra, exc_info)

            if users and environ.get("PATH_INFO") != "/healthz" and not check_basic_auth(
                    users, environ.get("HTTP_AUTHORIZATION", "")):
                body = b"Unauthorized\n"
                start("401 Unauthorized", [("Content-Type", "text/plain"), ("Content-Length", str(len(body))),
                                           ("WWW-Authenticate", 'Basic realm="sglang-exporter"')])
                return [body]
            return app(environ, start)

        return guarded


def check_basic_auth(users: dict[str, bytes], header: str) -> bool:
    """Whether an ``Authorization: Basic`` header names a user of ``users`` with the password its
    bcrypt hash was made from. An unknown user costs one bcrypt check as well."""
    import bcrypt

    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        user, sep, password = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    hashed = users.get(user)
    try:
        ok = bcrypt.checkpw(password.encode("utf-8"), hashed if hashed is not None else _DUMMY_HASH)
    except ValueError:  # a password bcrypt cannot take (NUL byte)
        return False
    return bool(sep) and hashed is not None and ok


class TlsFiles:
    """The TLS settings and an :class:`ssl.SSLContext` built from their files, built again when a
    file changes (:meth:`context`).

    Raises:
        WebConfigError: from the constructor, when the files do not make a context.
    """

    def __init__(self, cert_file: str, key_file: str, client_ca_file: str | None, client_auth_type: str,
                 min_version: str):
        self.cert_file, self.key_file, self.client_ca_file = cert_file, key_file, client_ca_file
        self.client_auth_type, self.min_version = client_auth_type, min_version
        self._lock = threading.Lock()
        self._stamp = self._files_stamp()
        try:
            self._context = self._build()
        except (OSError, ssl.SSLError) as exc:
            raise WebConfigError(f"cannot load the TLS certificate, key or client CAs: {exc}") from None

    @property
    def files(self) -> list[str]:
        return [p for p in (self.cert_file, self.key_file, self.client_ca_file) if p]

    def _files_stamp(self) -> tuple:
        out = []
        for p in self.files:
            try:
                st = os.stat(p)
                out.append((st.st_ino, st.st_mtime_ns, st.st_size))
            except OSError:
                out.append(None)
        return tuple(out)

    def _build(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = TLS_VERSIONS[self.min_version]
        ctx.load_cert_chain(self.cert_file, self.key_file)
        # Python's ssl checks every certificate it asks for against the CAs: without client CAs,
        # RequestClientCert asks for none (the exporter-toolkit would ask and not check).
        ctx.verify_mode = CLIENT_AUTH[self.client_auth_type] if self.client_ca_file else ssl.CERT_NONE
        if self.client_ca_file:
            ctx.load_verify_locations(cafile=self.client_ca_file)
        return ctx

    def context(self) -> ssl.SSLContext:
        """The context for a new connection: built again first when a file changed since (a
        Secret updated in place); when the new files do not load, the previous context stays."""
        stamp = self._files_stamp()
        if stamp != self._stamp:
            with self._lock:
                if stamp != self._stamp:
                    self._stamp = stamp
                    try:
                        self._context = self._build()
                        log.info("TLS certificate files changed: loaded again")
                    except (OSError, ssl.SSLError) as exc:
                        log.error("TLS certificate files changed but do not load (%s); keeping the previous ones",
                                  exc)
        return self._context


def load_web_config(path: str) -> WebConfig:
    """Read and check the web configuration file at ``path``.

    Raises:
        WebConfigError: an unreadable file, YAML that is not a mapping, an unknown or unsupported key,
            a bad value, a hash that is not bcrypt, or TLS files that do not load.
    """
    import yaml

    try:
        text = read_small_file(path, WEB_CONFIG_MAX_BYTES).decode("utf-8")
        data = yaml.safe_load(text)
    except OSError as exc:
        raise WebConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise WebConfigError(f"{path} is not YAML: {' '.join(str(exc).split())[:200]}") from None
    except ValueError as exc:  # not a regular file, or too large
        raise WebConfigError(f"{path}: {exc}") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise WebConfigError(f"{path}: must be a mapping of tls_server_config, basic_auth_users and "
                             "http_server_config")
    _keys(data, {"tls_server_config", "basic_auth_users", "http_server_config"}, set(), path, "")
    config = WebConfig(path)
    tls = _mapping(data.get("tls_server_config"), path, "tls_server_config")
    if tls:
        _keys(tls, _TLS_KEYS, _TLS_UNSUPPORTED, path, "tls_server_config.")
        cert, key = (_string(tls.get(k), path, f"tls_server_config.{k}") for k in ("cert_file", "key_file"))
        if not cert or not key:
            raise WebConfigError(f"{path}: tls_server_config needs both cert_file and key_file")
        ca = _string(tls.get("client_ca_file"), path, "tls_server_config.client_ca_file")
        auth = _string(tls.get("client_auth_type"), path, "tls_server_config.client_auth_type") or \
            ("RequireAndVerifyClientCert" if ca else "NoClientCert")
        if auth not in CLIENT_AUTH:
            raise WebConfigError(f"{path}: tls_server_config.client_auth_type must be one of "
                                 f"{', '.join(CLIENT_AUTH)}, got {auth[:80]!r}")
        if auth in ("RequireAndVerifyClientCert", "VerifyClientCertIfGiven") and not ca:
            raise WebConfigError(f"{path}: client_auth_type {auth} needs tls_server_config.client_ca_file")
        if auth == "RequireAnyClientCert" and not ca:
            raise WebConfigError(f"{path}: client_auth_type RequireAnyClientCert is not supported without "
                                 "client_ca_file (Python's ssl verifies every certificate it requires)")
        version = _string(tls.get("min_version"), path, "tls_server_config.min_version") or "TLS12"
        if version not in TLS_VERSIONS:
            raise WebConfigError(f"{path}: tls_server_config.min_version must be one of "
                                 f"{', '.join(TLS_VERSIONS)}, got {version[:80]!r}")
        base = os.path.dirname(os.path.abspath(path))  # exporter-toolkit: relative to the file
        files = [os.path.join(base, p) if p else p for p in (cert, key, ca)]
        config.tls = TlsFiles(files[0], files[1], files[2], auth, version)
    users = _mapping(data.get("basic_auth_users"), path, "basic_auth_users")
    for user, hashed in (users or {}).items():
        if not isinstance(user, str) or not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
            raise WebConfigError(f"{path}: basic_auth_users.{str(user)[:40]} must be a bcrypt hash ($2y$...), "
                                 "not a password")
        config.users[user] = hashed.encode()
    http = _mapping(data.get("http_server_config"), path, "http_server_config")
    if http:
        _keys(http, _HTTP_KEYS, _HTTP_UNSUPPORTED, path, "http_server_config.")
        for name, value in (_mapping(http.get("headers"), path, "http_server_config.headers") or {}).items():
            if not isinstance(name, str) or not isinstance(value, str) or any(c in name + value for c in "\r\n"):
                raise WebConfigError(f"{path}: http_server_config.headers: {str(name)[:40]} must be a header "
                                     "name with a string value on one line")
            if name.lower() in _RESERVED_HEADERS:
                raise WebConfigError(f"{path}: http_server_config.headers cannot set {name} (the server sets it)")
            config.headers.append((name, value))
    return config


def _keys(table: dict, known: set[str], unsupported: set[str], path: str, prefix: str) -> None:
    for key in table:
        if key in unsupported:
            raise WebConfigError(f"{path}: {prefix}{key} is not supported by sglang-exporter "
                                 f"(supported: {', '.join(sorted(known))})")
        if key not in known:
            raise WebConfigError(f"{path}: unknown key {prefix}{str(key)[:80]} (the keys are "
                                 f"{', '.join(sorted(known))})")


def _mapping(value, path: str, where: str) -> dict | None:
    if value is not None and not isinstance(value, dict):
        raise WebConfigError(f"{path}: {where} must be a mapping")
    return value


def _string(value, path: str, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise WebConfigError(f"{path}: {where} must be a string")
    return value or None
