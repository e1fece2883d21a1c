"""Logging shim for SGLang Omni: every log line names the process and the thread that printed it.

Put the directory of this file on the Omni server's ``PYTHONPATH``. Python imports ``sitecustomize``
at start-up in every interpreter, the stage processes Omni spawns included (they inherit the
environment), before Omni's own modules. The shim wraps ``logging.basicConfig`` so that any format
with ``%(name)s`` gets ``[%(processName)s/%(threadName)s]`` before it; Omni's format::

    %(asctime)s [%(levelname)s] %(name)s: %(message)s

becomes::

    %(asctime)s [%(levelname)s] [%(processName)s/%(threadName)s] %(name)s: %(message)s

and a stage's scheduler line reads ``... [INFO] [stage-talker_ar/scheduler-talker_ar]
sglang.srt...: Decode batch, ...``. Omni names its stage processes ``stage-<stage>``,
``stage-<stage>-leader``, ``stage-<stage>-tp<N>-follower`` or ``process-<group>`` and each stage's
scheduler thread ``scheduler-<stage>``; sglang-exporter reads the stage from them
(docs/sglang-omni.md). Nothing else changes: the level, the stream and Omni's ``--log-level`` stay
as Omni sets them (a call without a format, or with another style, is left alone), and a
``sitecustomize`` found later on the path still runs.

Checked against Omni's set-up: stage processes are started with the ``spawn`` method and configure
logging when they import Omni's profiler modules (``logging.basicConfig(level=INFO, format=...)`` at
import); the process name is read per record, after ``multiprocessing`` named the child. SGLang Omni
0.1.9 (measured, ``tests/test_real_omni.py``) configures each stage process with
``logging.basicConfig(level=<--log-level>, format=..., stream=sys.stdout)`` and its main process with
the same format on stderr: both get the token, the level and the streams stay Omni's, so run Omni
with ``2>&1`` into the file the sidecar reads. Under ``sglang serve --model-type omni`` a format
without ``%(name)s`` (SGLang's bare ``[%(asctime)s] %(message)s``) is left as it is.
"""

import importlib.util
import logging
import os
import sys

TOKEN = "[%(processName)s/%(threadName)s] "
_basic_config = logging.basicConfig


def _with_token(fmt):
    if isinstance(fmt, str) and "%(name)s" in fmt and TOKEN not in fmt:
        return fmt.replace("%(name)s", TOKEN + "%(name)s", 1)
    return fmt


def basicConfig(**kwargs):  # noqa: N802 - the name logging uses
    """``logging.basicConfig`` with the process and thread token added to a ``%``-style format."""
    if kwargs.get("style", "%") == "%" and "format" in kwargs:
        kwargs["format"] = _with_token(kwargs["format"])
    return _basic_config(**kwargs)


basicConfig.__wrapped__ = _basic_config
if getattr(logging.basicConfig, "__wrapped__", None) is None:
    logging.basicConfig = basicConfig


def _chain():
    """Run the next ``sitecustomize`` on the path (a distribution's), which this file shadows."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        folder = os.path.abspath(entry or os.curdir)
        candidate = os.path.join(folder, "sitecustomize.py")
        if folder == here or not os.path.isfile(candidate):
            continue
        spec = importlib.util.spec_from_file_location("_sitecustomize_chained", candidate)
        if spec is not None and spec.loader is not None:
            try:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            except Exception as exc:  # noqa: BLE001 - a broken chained file must not stop the server
                sys.stderr.write(f"sitecustomize (sglang-exporter shim): {candidate} failed: {exc!r}\n")
        return


_chain()
