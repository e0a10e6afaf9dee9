"""The plugin's version (pyproject.toml's), in a module of its own: the results file's validators read it
without importing the package's front, which imports them (an import circle)."""

__version__ = "0.1.0"
