"""Per-utterance scoring, duration buckets with bootstrap confidence intervals."""
