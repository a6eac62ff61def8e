"""Figures: WER versus input length, PE diagnostics."""
