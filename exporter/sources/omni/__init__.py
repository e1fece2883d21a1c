"""SGLang Omni's endpoints (``--omni.url``): the live per-stage snapshot and the pipeline's health.

SGLang Omni's log says what each stage's scheduler did (read by the log source, one scheduler per
stage); its API server says what each stage holds now. The package has the shape of every source::

    poller.OmniPoller   (thread "omni-poller": GET /health and /model_info per interval, a deadline per cycle)
      -> client.get_json  (one GET, classified: ok, timeout, unreachable, unauthorized, ...: read)
      -> decode.health / decode.model_info (answers -> typed snapshots: parse)
      -> collector.OmniCollector (sglang_omni_up, sglang_omni_stage_*, sglang_exporter_omni_*)
      -> silence.SilentStages (the poller's hook: a stage running requests that the log never names
         is warned about once)

It degrades like the GPU collector: when Omni does not answer, ``sglang_omni_up`` is 0 and the
per-stage snapshot is withheld; everything else keeps flowing. See docs/sglang-omni.md.
"""

from __future__ import annotations

from .collector import OmniCollector
from .poller import OmniPoller, OmniStatus, make_poller

__all__ = ["OmniCollector", "OmniPoller", "OmniStatus", "make_poller"]
