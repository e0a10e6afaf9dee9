"""Generated heuristics (pure Python), installed as ah_plugin.artifacts."""
