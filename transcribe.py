"""Transcribe one recording: ``python transcribe.py run=<run dir> audio=<file> [mode=full|chunked]``.

Prints the transcript on stdout and the time and peak memory on stderr; ``output=<file.json>``
also writes both to a JSON file. See conf/transcribe.yaml for every option.
"""

import os
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from asr_pe.errors import ConfigError
from asr_pe.io import atomic_write_json, unwritable_reason
from asr_pe.training.cli import friendly_errors, run_hydra_main


@hydra.main(config_path="conf", config_name="transcribe", version_base="1.3")
def main(cfg: DictConfig) -> None:
    import torch

    from asr_pe.inference.device import DeviceError
    from asr_pe.inference.transcribe import transcribe_file

    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    with friendly_errors():
        if cfg.output and unwritable_reason(cfg.output):  # before the work whose result it would hold
            raise ConfigError(f"output={cfg.output}: {unwritable_reason(cfg.output)}; choose another output file")
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
    if result["file_sample_rate"] != result["sample_rate"]:
        print(f"[transcribe] resampled {result['file_sample_rate']} -> {result['sample_rate']} Hz on load",
              file=sys.stderr)
    if cfg.output:
        with friendly_errors():
            try:
                atomic_write_json(cfg.output, result)
            except OSError as e:  # the folder changed during the run: the transcript is on stdout anyway
                raise ConfigError(f"output={cfg.output}: cannot write it ({e.strerror})") from None


if __name__ == "__main__":
    run_hydra_main(main)
