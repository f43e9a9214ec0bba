"""What a study costs before it runs: the plan (FLOPs, device-hours, power), the LR search's
worst case beside it (`lr_search`), its wall-clock on the executor, checkpoint disk, and the
pilot that measures instead of assuming.
"""
