"""Offline tools: data layer, data generation, training, code generation, evaluation."""
