"""The LR search (`lr.search`): each arm's LR grid extended until its optimum is inside
(`extend_grid`), and new sizes scanned on each arm's fitted LR law (`law_transfer`)."""
