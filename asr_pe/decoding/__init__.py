"""Decoding: CTC greedy and prefix beam search, CTC prefix scoring, attention beam search
(optionally joint CTC/attention), and optional n-gram LM shallow fusion for CTC.

Import from the submodules (``asr_pe.decoding.ctc`` etc.); this file stays import-light.
"""
