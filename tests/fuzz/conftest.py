"""tests/fuzz: the broker tests' raw Kafka client (tests/broker/clients.py) is used here too."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "broker"))
