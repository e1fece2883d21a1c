"""HTTP GETs of SGLang Omni's endpoints, each within a deadline, each answer classified.

Omni's API server (``sglang_omni/serve/openai_api.py``) answers ``GET /health`` always and ``GET
/model_info`` as an admin route: with ``SGLANG_OMNI_ADMIN_KEY`` set on the server it wants
``Authorization: Bearer <key>`` (401 without one, 403 with a wrong one;
``sglang_omni/http/admin_auth.py``). The standard library's client is enough for two small JSON
GETs on the pod's loopback; proxies from the environment are never used (Omni is a neighbour), and
redirects are never followed (a 3xx is ``http_error``): the admin key goes to the configured
host:port only. What is parsed is bounded, not only what is read: JSON expands tens of times in
memory (a 4 MiB answer of ``{}`` objects peaked at 249.5 MiB), so an answer over
:data:`MAX_BODY_BYTES` or with more than :data:`MAX_JSON_CONTAINERS` objects and arrays is
``bad_response`` before it is parsed.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

#: Largest answer read (a /model_info of a dozen stages is a few KiB).
MAX_BODY_BYTES = 256 << 10
#: Most JSON objects and arrays parsed in one answer (``{`` and ``[`` counted in the raw bytes, those
#: inside strings included; a dozen stages make about a hundred).
MAX_JSON_CONTAINERS = 4096
#: ``result`` values of a poll (``sglang_exporter_omni_polls_total``).
RESULTS = ("ok", "timeout", "unreachable", "unauthorized", "http_error", "bad_response")



class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is answered as it is (an ``HTTPError``), never followed with the admin key elsewhere."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


@dataclass(frozen=True, slots=True)
class Answer:
    """One GET: ``result`` (one of :data:`RESULTS`), the HTTP ``status`` (0 without one), the JSON
    ``body`` (a dict) when the answer was JSON, and a short ``detail`` for the log."""

    result: str
    status: int = 0
    body: dict[str, Any] | None = None
    detail: str = ""


def get_json(url: str, timeout: float, admin_key: str | None = None) -> Answer:
    """GET ``url`` and read a JSON object, within ``timeout`` seconds. Never raises.

    A non-2xx answer with a JSON body (Omni's ``/health`` answers 503 with its body when the pipeline
    is not running) keeps its body; 401 and 403 are ``unauthorized`` (the admin key).
    """
    headers = {"Accept": "application/json"}
    if admin_key:
        headers["Authorization"] = f"Bearer {admin_key}"
    request = urllib.request.Request(url, headers=headers, method="GET")
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            status, raw = response.status, response.read(MAX_BODY_BYTES + 1)
    except urllib.error.HTTPError as exc:
        status = exc.code
        try:
            raw = exc.read(MAX_BODY_BYTES + 1)
        except (OSError, http.client.HTTPException):
            raw = b""
        finally:
            exc.close()
        if status in (401, 403):
            return Answer("unauthorized", status, detail=f"HTTP {status}")
    except (TimeoutError, socket.timeout):
        return Answer("timeout", detail=f"no answer within {timeout:g} s")
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return Answer("timeout", detail=f"no answer within {timeout:g} s")
        return Answer("unreachable", detail=str(reason)[:200])
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return Answer("unreachable", detail=f"{type(exc).__name__}: {str(exc)[:200]}")
    if len(raw) > MAX_BODY_BYTES:
        return Answer("bad_response", status, detail=f"answer larger than {MAX_BODY_BYTES} bytes")
    if raw.count(b"{") + raw.count(b"[") > MAX_JSON_CONTAINERS:
        return Answer("bad_response", status, detail=f"more than {MAX_JSON_CONTAINERS} JSON objects and arrays")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return Answer("http_error" if status >= 300 else "bad_response", status, detail="not JSON")
    if not isinstance(body, dict):
        return Answer("bad_response", status, detail="not a JSON object")
    if status >= 300:
        return Answer("http_error", status, body, detail=f"HTTP {status}")
    return Answer("ok", status, body)
