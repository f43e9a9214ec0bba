"""Warm start of local cells: a server that imports torch, megatron-core and mlflow once and
forks each task (`server`), and the task command that asks it to (`client`)."""
