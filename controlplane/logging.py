"""Log formatting and a filter that keeps secrets out of log lines."""

from __future__ import annotations

import json
import logging
import re

# Bearer tokens, API keys (tdm_...), PEM blocks and key=value secrets.
_SECRET_PATTERNS = [
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"), r"\1[redacted]"),
    (re.compile(r"\btdm_[A-Za-z0-9_]+"), "tdm_[redacted]"),
    (re.compile(r"-----BEGIN [A-Z ]+-----.*?-----END [A-Z ]+-----", re.S), "[redacted pem]"),
    (
        re.compile(r"(?i)((?:token|password|secret|api[_-]?key)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
        r"\1[redacted]",
    ),
]


def redact(text: str) -> str:
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


_TRACEBACKS = logging.Formatter()


class RedactSecretsFilter(logging.Filter):
    """Redacts the message and any traceback or stack attached to it (every formatter then uses those)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = _TRACEBACKS.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


class RoutineRefusalFilter(logging.Filter):
    """A refusal (4xx) is routine: Django logs a page's PermissionDenied with its traceback, and this
    keeps the one line (path and status) and drops the traceback. A 5xx keeps everything."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info, record.exc_text = None, None
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "time": self.formatTime(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            payload["exception"] = redact(record.exc_text or self.formatException(record.exc_info))
        return json.dumps(payload)
