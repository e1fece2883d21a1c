"""A local HTTP server that answers as SGLang Omni's API server does (GET /health, GET /model_info).

The bodies have Omni's real shapes (``sglang_omni/serve/openai_api.py``: ``_register_health`` and
``_model_info_response``; ``Coordinator.health()``; ``Coordinator._aggregate_admin_results``;
``proto/admin.py`` ``AdminResult.to_dict``; ``OmniScheduler._admin_model_info`` for an SGLang stage;
``{"skipped": true}`` for a stage without an SGLang scheduler), and the admin route checks
``Authorization: Bearer <key>`` as ``http/admin_auth.py`` does (401 without it, 403 when wrong).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def scheduler_info(waiting: int, running: int, paused: bool = False, backlog: int = 0) -> dict:
    """``OmniScheduler._admin_model_info()["data"]`` of an SGLang-backed stage."""
    return {"model_path": "Qwen/Qwen3-Omni-30B-A3B-Instruct", "load_format": "auto", "weight_version": "default",
            "stage_tp_rank": 0, "stage_tp_size": 1, "engine_paused": paused, "waiting_queue_size": waiting,
            "request_build_workers": 4, "request_build_pending": 1, "request_admission_pending": 0,
            "request_build_max_pending": 16, "request_build_backlog": backlog,
            "request_build_max_pending_observed": 3, "running_batch_size": running,
            "prefill_cuda_graph": {"enabled": False}}


def admin_result(stage: str, data: dict, rank=None, role=None, success=True) -> dict:
    """``AdminResult.to_dict()`` of one stage."""
    return {"op_id": "op-1", "stage": stage, "action": "model_info", "success": success, "message": "ok" if success else "",
            "data": data, "error": None, "rank": rank, "role": role}


def model_info_body(results: list[dict]) -> dict:
    """The /model_info answer: the coordinator's aggregate plus the route's common fields and ``stages``."""
    return {"op_id": "op-1", "action": "model_info", "success": all(r["success"] for r in results), "message": "ok",
            "results": results, "weight_version": "default", "model_path": "Qwen/Qwen3-Omni-30B-A3B-Instruct",
            "load_format": "auto", "stages": results}


def health_body(running: bool = True, states: dict | None = None, pending: int = 3) -> dict:
    states = {"running": 5, "pending": 2} if states is None else states
    return {"status": "healthy" if running else "unhealthy", "running": running,
            "stages": ["preprocessing", "thinker", "talker_ar", "code2wav", "decode"], "entry_stage": "preprocessing",
            "total_requests": sum(states.values()), "pending_completions": pending, "request_states": states}


QWEN3_OMNI = [admin_result("preprocessing", {"skipped": True}),
              admin_result("thinker", scheduler_info(4, 12, backlog=2), rank=0, role="single"),
              admin_result("talker_ar", scheduler_info(0, 3, paused=True), rank=0, role="leader"),
              admin_result("talker_ar", scheduler_info(9, 9), rank=1, role="follower"),
              admin_result("code2wav", {"unsupported": True})]


class FakeOmni:
    """The server on a free loopback port. Change its attributes between polls.

    Attributes:
        health / model_info: bodies (dicts) or raw bytes to answer with.
        running: /health answers 200 when true, 503 (with its body) when false, as Omni does.
        admin_key: when set, /model_info wants ``Authorization: Bearer <admin_key>``.
        delay: seconds to wait before answering.
        seen_auth: the Authorization headers received by /model_info.
        redirect: when set, /model_info answers 302 to this URL.
    """

    def __init__(self):
        self.health = health_body()
        self.model_info = model_info_body(QWEN3_OMNI)
        self.running = True
        self.admin_key: str | None = None
        self.delay = 0.0
        self.seen_auth: list[str | None] = []
        self.redirect: str | None = None
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # noqa: N802 - http.server's name
                time.sleep(fake.delay)
                if self.path == "/health":
                    body = dict(fake.health, running=fake.running, status="healthy" if fake.running else "unhealthy")
                    self._send(200 if fake.running else 503, body)
                elif self.path == "/model_info" and fake.redirect:
                    self.send_response(302)
                    self.send_header("Location", fake.redirect)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif self.path == "/model_info":
                    auth = self.headers.get("Authorization")
                    fake.seen_auth.append(auth)
                    if fake.admin_key:
                        if not auth or not auth.lower().startswith("bearer "):
                            return self._send(401, {"detail": "Admin API key required: Authorization: Bearer <key>"})
                        if auth.split(None, 1)[1] != fake.admin_key:
                            return self._send(403, {"detail": "Invalid admin API key"})
                    self._send(200, fake.model_info)
                else:
                    self._send(404, {"detail": "Not Found"})

            def _send(self, status, body):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the exporter stopped reading past its cap

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def omni_exposition() -> str:
    """The real Omni collector's exposition text after one poll of a :class:`FakeOmni`."""
    from prometheus_client import CollectorRegistry, generate_latest

    from exporter.sources.omni import OmniCollector, OmniPoller

    fake = FakeOmni()
    try:
        poller = OmniPoller(fake.url, environ={})
        poller.run_cycle()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(OmniCollector(poller))
        return generate_latest(registry).decode()
    finally:
        fake.close()
