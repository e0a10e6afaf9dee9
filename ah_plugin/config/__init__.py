"""Configuration: every environment variable and its Python-API twin (``settings``), the one rule for a bad
value (``env_values``), misspelled names and values (``env_names``, ``did_you_mean``). Standard library only:
the ``torch.backends`` entry point reads these at ``import torch``."""
