"""The variant catalog: the registry, the built-in variants, their sites and init rules."""
