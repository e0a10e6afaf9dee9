"""ah-plugin: learned max-autotune for matrix multiplies in torch.compile."""

__version__ = "0.1.0"
