"""How a process of the project behaves: rank-0 prints, quiet third-party output,
megatron-core's fused kernels compiled on first use, and child processes stopped and killed."""
