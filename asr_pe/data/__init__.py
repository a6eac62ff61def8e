"""Data: manifests, corpora, features, tokenizers and batching (no Lightning/Hydra imports)."""
