"""Argument types the diagnostic scripts share (argparse `type=`): each refuses what is wrong with
one line naming it."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

__all__ = ["names_of"]


def names_of(known: Sequence[str]) -> Callable[[str], list[str]]:
    """A comma-separated list, each of `known`."""
    def parse(text: str) -> list[str]:
        out = text.split(",")
        bad = [x for x in out if x not in known]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {', '.join(map(repr, bad))} (of {', '.join(known)})")
        return out
    return parse
