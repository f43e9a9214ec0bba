"""What a study costs before it runs: the plan (FLOPs, device-hours, power), its wall-clock on
the executor, checkpoint disk, and the pilot that measures instead of assuming.
"""
