"""Inference over long recordings: full-context encoding in query blocks (``long_form``) and
chunked encoding with overlap (``chunked``)."""
