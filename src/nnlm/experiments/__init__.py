"""Experiments from the paper: presets (mlp1 ... mlp10, modern) and the reproduction."""
