"""Offline tools, one sub-package per stage: data, datagen, training (with code generation), evaluation.

``mm`` holds the mm command lines; the top-level modules are the documented ``python -m`` names.
"""
