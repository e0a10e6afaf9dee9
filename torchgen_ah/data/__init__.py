"""The data layer: AutoHeuristic logs on disk and in pandas, repetitions, merges, splits, official datasets."""
