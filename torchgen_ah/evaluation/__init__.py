"""Evaluation: policies and rankers scored on measured timings, compile cost, and the benchmarks' reports."""
