"""How many synthetic studies an error-rate test needs, from the binomial bound it asserts.

A test of "this procedure errs at most at rate p" counts errors over n independent studies and
fails above `max_count(n, p)`, the count a procedure at exactly p exceeds with probability 1%.
More studies than the claim needs only cost time; fewer let a broken procedure pass. The count
`studies_to_catch(p, times)` is the fewest studies at which a procedure erring at `times` x p
fails that bound with probability `power` (90%): the test then catches such a procedure nine
times in ten, and wrongly fails a correct one once in a hundred.
"""

from __future__ import annotations

from functools import cache

from scipy import stats

CONFIDENCE = 0.99  # a correct procedure fails the test with probability <= 1%
POWER = 0.90


def max_count(n: int, rate: float, confidence: float = CONFIDENCE) -> int:
    """The most errors in `n` studies that a procedure erring at `rate` passes with."""
    return int(stats.binom.ppf(confidence, n, rate))


@cache
def studies_to_catch(rate: float, times: float, power: float = POWER, step: int = 5) -> int:
    """The fewest studies (a multiple of `step`) at which a procedure erring at `times` x `rate`
    exceeds `max_count` with probability >= `power`."""
    n = step
    while stats.binom.sf(max_count(n, rate), n, times * rate) < power:
        n += step
    return n
