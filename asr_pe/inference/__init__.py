"""Inference over long recordings: full-context encoding in query blocks (``full_context``) and
chunked encoding with overlap (``chunked``)."""
