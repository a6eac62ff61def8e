"""Transcribe one recording: ``python transcribe.py run=<run dir> audio=<file> [mode=full|chunked]``.

Prints the transcript on stdout and the time and peak memory on stderr; ``output=<file.json>``
also writes both to a JSON file. See conf/transcribe.yaml for every option.
"""

import json
import os
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from asr_pe.training.cli import friendly_errors


@hydra.main(config_path="conf", config_name="transcribe", version_base="1.3")
def main(cfg: DictConfig) -> None:
    import torch

    from asr_pe.inference.device import DeviceError
    from asr_pe.inference.transcribe import transcribe_file

    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    with friendly_errors():
        try:
            result = transcribe_file(
                cfg.run, cfg.audio, mode=cfg.mode, chunk_s=cfg.chunk_s, overlap_s=cfg.overlap_s,
                block_size=cfg.block_size, checkpoint=cfg.checkpoint, device=cfg.device,
                decode=OmegaConf.to_container(cfg.decode, resolve=True), offset=cfg.offset, duration=cfg.duration,
                remedy=cfg.remedy, train_length_s=cfg.train_length_s,
            )
        except DeviceError as e:  # device=cuda without a GPU: one line, like friendly_errors
            if os.environ.get("ASR_PE_DEBUG"):
                raise
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
    print(result["text"])
    how = (f"block={result['block_size'] or 'none'}" if result["mode"] == "full"
           else f"chunk {result['chunk_s']} s + {result['overlap_s']} s overlap")
    print(f"[transcribe] {result['seconds_audio']:.1f} s of audio, {result['encoder_frames']} encoder frames, "
          f"mode={result['mode']} ({how}), device {result['device']}, {result['threads']} threads: "
          f"features {result['time_features_s']:.2f} s, "
          f"encoder {result['time_encode_s']:.2f} s, decoding {result['time_decode_s']:.2f} s, RTF {result['rtf']:.3f}, "
          f"peak memory {result['peak_memory_mb'] / 1024:.2f} GiB", file=sys.stderr)
    if cfg.output:
        out = Path(cfg.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(result, indent=2) + "\n")
        os.replace(tmp, out)


if __name__ == "__main__":
    main()
