"""Driving a study: the round driver (`round_driver.StudyRun`), one submission of the due
cells, the watcher of a round, its progress and ETA, re-uploads after a lost store, and
`scaling run`'s whole course (`run`)."""
