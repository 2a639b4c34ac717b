"""What a profile lacks or what was assumed, in words users read (never a blank page)."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Diagnostic:
    severity: str  # info | warning | error
    code: str
    message: str

    def to_json(self) -> dict:
        return dataclasses.asdict(self)
