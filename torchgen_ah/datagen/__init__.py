"""Data generation: the runner shared by generators, its workers and devices, and the inputs they time."""
