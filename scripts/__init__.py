"""Recipes that rebuild the shipped models from the shared corpora with the product's own CLI."""
