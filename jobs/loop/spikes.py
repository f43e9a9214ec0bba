"""Loss spikes: a step whose `train/loss` jumps above `spike_factor` x the running loss.

The running loss is an exponential moving average (EMA, `EMA_BETA` = 0.9: about the last ten
steps) of every finite training loss *before* the step judged, started at the first loss; a
spike's own loss then enters it like any other, so a lasting jump is absorbed within some tens
of steps and a brief one is counted once per step above the line. A non-finite loss is not a
spike (the trainer ends the run as diverged on it). The first step has no running loss and is
never a spike.

The EMA and the spike steps live in the run's `LossHistory`, which every checkpoint saves, so a
resumed run continues the count from its checkpoint: steps replayed after a restart are judged
again from the same state and counted once.
"""

from __future__ import annotations

import math

__all__ = ["EMA_BETA", "is_spike", "next_ema"]

EMA_BETA = 0.9  # weight of the old average: ~10 steps of memory


def is_spike(loss: float, ema: float, factor: float) -> bool:
    """True when `loss` is finite and above `factor` x the running loss `ema` (NaN: none yet)."""
    return math.isfinite(loss) and math.isfinite(ema) and loss > factor * ema


def next_ema(ema: float, loss: float) -> float:
    """The running loss after `loss` (NaN `ema`: the first loss starts it; non-finite skipped)."""
    if not math.isfinite(loss):
        return ema
    if not math.isfinite(ema):
        return loss
    return EMA_BETA * ema + (1 - EMA_BETA) * loss
