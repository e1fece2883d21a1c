"""The scheduler log source: follow SGLang's log files, parse each line, apply the events.

Data flow, one module per step::

    file.py, glob.py   paths -> open files (identity, rotation, truncation), driven by follower.py
    lines.py           bytes -> lines
    parser.py          line -> typed event (exporter.events) or Malformed or nothing;
                       prefix.py reads who printed it and when (rank tags, timestamp, Omni's shim token);
                       omni.py reads SGLang Omni's own lines
    attribution.py     SGLang Omni's events -> their stage (or none: counted as unattributed)
    ingest.py          events -> SchedulerStore.apply; lines counted by kind and result
    stats.py           the source's own statistics; collector.py: sglang_exporter_log_*
    source.py          LogSource: the above assembled for the command
"""
