"""GPU health micro-benchmarks and their judging: below both live (the gpu_health phase) and bench."""
