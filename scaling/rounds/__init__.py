"""Running a study's rounds: the one round driver (`driver.StudyRun`), one submission of the due
cells, the executors (one class per backend), local warm start, the LR search's judging, the
progress and ETA of a round, and `scaling run`'s whole course.

- `scaling.rounds.backends`: the executors, one class per backend, and the jobs each one runs.
"""
