"""Random signal values for codec round trips."""
from __future__ import annotations

import random

from firmware_bridge.wire.messages import Codec


def random_values(codec: Codec, rng: random.Random, *, on_grid: bool = False) -> list[float]:
    """Physical values within each signal's range, anywhere (the encoder rounds) or `on_grid` (exact raw
    values); a counter takes any value its bits hold."""
    out = []
    for s in codec.spec.signals:
        if s.name == codec.spec.counter:
            out.append(float(rng.randrange(1 << s.length_bits)))
        elif on_grid:
            lo, hi = sorted(((s.minimum - s.offset) / s.scale, (s.maximum - s.offset) / s.scale))
            out.append(rng.randint(int(-(-lo // 1)), int(hi // 1)) * s.scale + s.offset)
        else:
            out.append(rng.uniform(s.minimum, s.maximum))
    return out
