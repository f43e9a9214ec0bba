"""Seed noise: the two-component model and its bootstrap, cell losses, checks of the model."""
