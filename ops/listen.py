"""The daemon's HTTP address, `listen:` or `--listen`: parsed once for the server that binds it
(ops.api, ops.backend) and for the commands that ask it (`freshet status --config`)."""

from __future__ import annotations

import re

from warehouse.errors import ConfigError

__all__ = ["connect_url", "parse_listen"]


def parse_listen(value: str) -> tuple[str, int]:
    """`HOST:PORT` (or `[v6]:PORT`, or `:PORT` = 127.0.0.1) → (host, port); ConfigError naming it."""
    m = re.match(r"^(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\[\]]*)):(?P<port>\d{1,5})$", value.strip())
    if not m or int(m.group("port")) > 65535:
        raise ConfigError(f"listen: expected HOST:PORT such as 127.0.0.1:9464, got {value!r}")
    host = m.group("v6") or m.group("host") or "127.0.0.1"
    return host, int(m.group("port"))


def connect_url(listen: str) -> str:
    """The URL a client on this machine asks a daemon listening at `listen` on: a wildcard host
    (0.0.0.0, ::) is asked on loopback."""
    host, port = parse_listen(listen)
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"
