"""`torch.backends` entry point. Placeholder until the plugin lands: does nothing, never raises."""


def autoload() -> None:
    return None
