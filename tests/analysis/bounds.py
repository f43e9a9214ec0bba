"""How many synthetic studies an error-rate test needs, from the binomial bound it asserts.

A test of "this procedure errs at most at rate p" counts errors over n independent studies and
fails above `max_count(n, p)`, the count a procedure at exactly p exceeds with probability 1%.
More studies than the claim needs only cost time; fewer let a broken procedure pass. The count
`studies_to_catch(p, times)` is the fewest studies at which a procedure erring at `times` x p
fails that bound with probability `power` (90%): the test then catches such a procedure nine
times in ten, and wrongly fails a correct one once in a hundred.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TypeVar

import numpy as np
from scipy import stats

R = TypeVar("R")

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


# --- sequential replays -------------------------------------------------------------------------
#
# A replay of a correct procedure mostly errs well below its nominal rate, so its fixed study
# count (sized for a procedure at the worst rate that must still fail) is mostly spent confirming
# what the first few dozen studies already said. `RateTest` is Wald's sequential probability
# ratio test of "errs at `rate`" (p0) against "errs at `times` x `rate`" (p1), looked at after
# each batch of `batch` studies and truncated at `max_n` (the fixed design it replaces): a
# replay stops at the first batch where the test is decided. Its error rates are not Wald's
# approximations but computed exactly (`RateTest.operating`) over the binomial counts.

ALPHA_SEQ = 0.01  # Wald's nominal chance to fail a procedure erring at exactly `rate`
BETA_SEQ = 0.10  # Wald's nominal chance to pass one erring at `times` x `rate`


@dataclass(frozen=True)
class RateTest:
    """Errors counted over studies looked at after every `batch`: "fail" once the likelihood
    ratio of `times` x `rate` against `rate` reaches (1 - beta) / alpha, "pass" once it falls to
    beta / (1 - alpha); at `max_n` studies, undecided, it fails above `max_count(max_n, rate)`."""

    rate: float
    times: float
    batch: int
    max_n: int
    alpha: float = ALPHA_SEQ
    beta: float = BETA_SEQ

    @property
    def bad_rate(self) -> float:
        return self.times * self.rate

    def looks(self) -> list[int]:
        """The study counts at which the test decides: every `batch`, and `max_n`."""
        return sorted({*range(self.batch, self.max_n, self.batch), self.max_n})

    def bounds(self, n: int) -> tuple[int, int]:
        """(the most errors in `n` studies that pass now, the fewest that fail now)."""
        if n >= self.max_n:
            last = max_count(self.max_n, self.rate)
            return last, last + 1
        up = math.log(self.bad_rate / self.rate)  # each error's log-likelihood ratio
        down = math.log((1 - self.bad_rate) / (1 - self.rate))  # each success's (< 0)
        fail_at = math.log((1 - self.beta) / self.alpha)
        pass_at = math.log(self.beta / (1 - self.alpha))
        # llr(c) = c * up + (n - c) * down is increasing in c
        passes = math.floor((pass_at - n * down) / (up - down) + 1e-12)
        fails = math.ceil((fail_at - n * down) / (up - down) - 1e-12)
        return passes, fails

    def decide(self, n: int, errors: int) -> str | None:
        """ "pass", "fail", or None (undecided: run the next batch)."""
        passes, fails = self.bounds(n)
        if errors >= fails:
            return "fail"
        if errors <= passes:
            return "pass"
        return None

    def operating(self, p: float) -> tuple[float, float]:
        """(the chance to fail, the expected number of studies) of a procedure erring at `p`,
        exactly: the distribution of the error count over the paths still undecided, carried
        from look to look by the binomial of each batch."""
        live = np.array([1.0])  # P(count = c, undecided so far), c = 0..
        n = 0
        failed = expected = 0.0
        for look in self.looks():
            step = look - n
            grown = np.convolve(live, stats.binom.pmf(np.arange(step + 1), step, p))
            counts = np.arange(len(grown))
            passes, fails = self.bounds(look)
            failed += grown[counts >= fails].sum()
            stopped = grown[(counts >= fails) | (counts <= passes)].sum()
            expected += look * stopped
            grown[(counts >= fails) | (counts <= passes)] = 0.0
            live, n = grown, look
        return float(failed), float(expected)


def replay_until_decided(
    fn: Callable[[int], R],
    tests: dict[str, tuple[RateTest, Callable[[R], bool]]],
    until: Callable[[list[R]], bool] = lambda results: True,
) -> tuple[list[R], dict[str, str]]:
    """`fn` over studies 0, 1, ... in batches until every test in `tests` (name: (its
    `RateTest`, whether a result is an error)) is decided and `until(results)` holds, or the
    tests' `max_n`; a test decided at a look keeps that decision. All tests share one `batch`
    and `max_n`. Returns the results and each test's decision ("pass" or "fail")."""
    from tests.analysis.pool import map_studies

    (batch,) = {t.batch for t, _ in tests.values()}
    (max_n,) = {t.max_n for t, _ in tests.values()}
    rate_test = next(iter(tests.values()))[0]
    results: list[R] = []
    decided: dict[str, str] = {}
    for look in rate_test.looks():
        results += map_studies(fn, range(len(results), look))
        for name, (test, is_error) in tests.items():
            if name not in decided:
                word = test.decide(len(results), sum(map(is_error, results)))
                if word is not None:
                    decided[name] = word
        if len(decided) == len(tests) and until(results):
            break
    assert len(results) <= max_n
    return results, decided
