"""The API's bearer token (docs/operations.md §2): read by the server (`ops.api`) and by the
clients that call it (`ops.actions`' CLI) — a leaf module, so neither imports the other for it."""

from __future__ import annotations

import os
from pathlib import Path

from warehouse.errors import ConfigError

__all__ = ["load_token"]


def load_token(env: dict[str, str] | None = None) -> str | None:
    """The bearer token: `FRESHET_API_TOKEN`, or the first line of `FRESHET_API_TOKEN_FILE`."""
    env = dict(os.environ) if env is None else env
    tok = env.get("FRESHET_API_TOKEN")
    path = env.get("FRESHET_API_TOKEN_FILE")
    if not tok and path:
        try:
            tok = Path(path).read_text().strip()
        except OSError as e:
            raise ConfigError(f"FRESHET_API_TOKEN_FILE={path}: cannot read: {e.strerror}") from None
        if not tok:
            raise ConfigError(f"FRESHET_API_TOKEN_FILE={path}: the file is empty")
    return tok or None
