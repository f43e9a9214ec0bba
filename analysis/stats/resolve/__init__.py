"""What would resolve an unresolved verdict, and a closed loop that buys it inside the error budget.

``evidence``: what a look reads of the deciding interval (the top-size gain, its seeds' sd, the
LR grid's term) from a run table (the verdict's binding test, fast) or from a finished analysis.
``options``: the evidence that could resolve it (more seeds, a finer LR grid near each arm's
best LR, one more size, longer training), each priced in device-hours by a per-cell cost
function and given its predicted half-width and probability of resolving.
``loop``: judge, price, buy the best option within the budget, judge again as a look of a design
declared before the first extension, whose levels are the alpha-spending's increments.
"""
