"""The scheduler log source: follow SGLang's log files, parse each line, apply the events."""
