"""espeak-ng speech synthesis through ctypes, using the library shipped by ``espeakng_loader``.

The wheel carries ``libespeak-ng`` and its data, so the corpus needs no system package.
Synthesis is synchronous: ``espeak_Synth`` returns once the whole text is spoken, and a
callback collects the 16-bit samples. espeak-ng has process-global state, so one engine
is initialised per process.

That state also makes output depend on history: the pitch-flutter phase (a function-local
static in wavegen.c), the glottal phase and the resonator memories carry over from one
utterance to the next, and breath noise draws from libc ``rand()``. Calling the engine
twice with the same arguments therefore gives different samples. For a reproducible
corpus, :class:`IsolatedSynthesizer` runs a small server process (this file run as a
script) that initialises espeak-ng once, never speaks itself, and forks a child per
utterance: every utterance starts from the same pristine state with a fixed random seed,
so the same request always returns the same bytes, whatever was spoken before.

This module imports nothing from ``asr_pe`` (and numpy only when an array is returned) so
that it can run as that small server script, which is cheap to fork.
"""

from __future__ import annotations

import ctypes
import gc
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from asr_pe.errors import UserError

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

# espeak_AUDIO_OUTPUT
_AUDIO_OUTPUT_SYNCHRONOUS = 2
# espeak_Initialize options: return an error code instead of calling exit() on failure
_INITIALIZE_DONT_EXIT = 0x8000
# espeak_PARAMETER
_RATE, _VOLUME, _PITCH, _RANGE, _WORDGAP = 1, 2, 3, 4, 7
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
# espeak_ERROR
_ERRORS = {-1: "EE_INTERNAL_ERROR", 1: "EE_BUFFER_FULL", 2: "EE_NOT_FOUND"}

MIN_RATE, MAX_RATE = 80, 450  # words per minute accepted by espeak-ng

_SynthCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)


class EspeakError(UserError, RuntimeError):
    """espeak-ng could not be loaded, initialised, or asked to speak."""


class EspeakEngine:
    """One initialised espeak-ng instance (the library has process-global state).

    Use :func:`get_engine` rather than constructing this directly.
    """

    def __init__(self, library_path: str | None = None, data_path: str | None = None):
        if library_path is None or data_path is None:
            try:
                import espeakng_loader
            except ImportError as e:
                raise EspeakError(
                    "the synthetic corpus needs the 'espeakng-loader' package "
                    "(pip install espeakng-loader), which ships libespeak-ng and its data"
                ) from e
            library_path = library_path or espeakng_loader.get_library_path()
            try:
                data_path = data_path or espeakng_loader.get_data_path()
            except RuntimeError as e:
                raise EspeakError(f"espeakng_loader has no espeak-ng data: {e}") from e
        try:
            lib = ctypes.CDLL(library_path)
        except OSError as e:
            raise EspeakError(f"cannot load libespeak-ng from {library_path}: {e}") from e
        if not Path(data_path).is_dir():
            raise EspeakError(f"espeak-ng data folder not found: {data_path}")

        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetSynthCallback.argtypes = [_SynthCallback]
        lib.espeak_SetSynthCallback.restype = None
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_SetParameter.restype = ctypes.c_int
        lib.espeak_Synth.argtypes = [
            ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
            ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p,
        ]
        lib.espeak_Synth.restype = ctypes.c_int
        lib.espeak_Synchronize.restype = ctypes.c_int
        lib.espeak_Info.argtypes = [ctypes.c_void_p]
        lib.espeak_Info.restype = ctypes.c_char_p
        # espeak-ng >= 1.52 seeds its own noise generator; older builds lack it.
        self._set_rand_seed = getattr(lib, "espeak_ng_SetRandSeed", None)
        if self._set_rand_seed is not None:
            self._set_rand_seed.argtypes = [ctypes.c_long]
            self._set_rand_seed.restype = ctypes.c_int
        self._libc = ctypes.CDLL(None) if os.name == "posix" else None

        sample_rate = lib.espeak_Initialize(
            _AUDIO_OUTPUT_SYNCHRONOUS, 0, os.fsencode(data_path), _INITIALIZE_DONT_EXIT
        )
        if sample_rate <= 0:
            raise EspeakError(
                f"espeak_Initialize failed ({_ERRORS.get(sample_rate, sample_rate)}) "
                f"with data folder {data_path}"
            )
        self._lib = lib
        self._chunks: list[bytes] = []
        # Keep a reference: ctypes frees the trampoline when the Python object dies.
        self._callback = _SynthCallback(self._collect)
        lib.espeak_SetSynthCallback(self._callback)
        self.sample_rate: int = sample_rate
        self.version: str = lib.espeak_Info(None).decode()
        self.library_path = library_path
        self.data_path = data_path

    def _collect(self, wav, num_samples, events) -> int:
        if num_samples > 0 and wav:
            self._chunks.append(ctypes.string_at(wav, 2 * num_samples))
        return 0  # 0 = continue synthesis

    def _set(self, parameter: int, value: int, name: str) -> None:
        rc = self._lib.espeak_SetParameter(parameter, int(value), 0)
        if rc != 0:
            raise EspeakError(f"espeak_SetParameter({name}={value}) failed: {_ERRORS.get(rc, rc)}")

    def synthesize(
        self,
        text: str,
        voice: str = "en-us",
        rate: int = 175,
        pitch: int = 50,
        pitch_range: int = 50,
        volume: int = 100,
        word_gap: int = 0,
        seed: int | None = None,
    ) -> tuple[np.ndarray, int]:
        """Speak ``text``; return ``(samples (N,) int16, sample_rate)``.

        Every voice parameter is set on each call; ``seed`` (when given) seeds the breath
        noise. The samples still depend on earlier calls in this process (see the module
        docstring); use :class:`IsolatedSynthesizer` for bit-reproducible audio.
        """
        import numpy as np

        data = self.synthesize_bytes(text, voice, rate, pitch, pitch_range, volume, word_gap, seed)
        return np.frombuffer(data, dtype=np.int16).copy(), self.sample_rate

    def synthesize_bytes(self, text: str, voice: str = "en-us", rate: int = 175, pitch: int = 50,
                         pitch_range: int = 50, volume: int = 100, word_gap: int = 0,
                         seed: int | None = None) -> bytes:
        """Like :meth:`synthesize`, but the samples as native-endian int16 bytes."""
        check_request(text, rate, pitch, pitch_range)
        if seed is not None:
            if self._set_rand_seed is not None:
                self._set_rand_seed(int(seed))
            if self._libc is not None:
                self._libc.srand(ctypes.c_uint(int(seed) & 0xFFFFFFFF))
        rc = self._lib.espeak_SetVoiceByName(voice.encode())
        if rc != 0:
            raise EspeakError(
                f"unknown espeak-ng voice {voice!r} ({_ERRORS.get(rc, rc)}); use a language "
                "name from espeak-ng-data/lang (en-us, en, en-gb-scotland, en-029, ...) "
                "optionally with a variant from voices/!v (en-us+f3, en+m3)"
            )
        self._set(_RATE, rate, "rate")
        self._set(_PITCH, pitch, "pitch")
        self._set(_RANGE, pitch_range, "range")
        self._set(_VOLUME, volume, "volume")
        self._set(_WORDGAP, word_gap, "wordgap")

        data = text.encode("utf-8")
        self._chunks = []
        rc = self._lib.espeak_Synth(data, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8,
                                    None, None)
        if rc != 0:
            raise EspeakError(f"espeak_Synth failed ({_ERRORS.get(rc, rc)}) for text {text[:60]!r}")
        self._lib.espeak_Synchronize()
        chunks, self._chunks = self._chunks, []
        return b"".join(chunks)


def check_request(text: str, rate: int, pitch: int, pitch_range: int) -> None:
    """Reject arguments espeak-ng would silently clamp or ignore."""
    if not text.strip():
        raise ValueError("cannot synthesize empty text")
    if not MIN_RATE <= rate <= MAX_RATE:
        raise ValueError(f"rate must be in [{MIN_RATE}, {MAX_RATE}] words/min, got {rate}")
    if not 0 <= pitch <= 100 or not 0 <= pitch_range <= 100:
        raise ValueError(f"pitch and pitch_range must be in [0, 100], got {pitch}, {pitch_range}")


_ENGINE: EspeakEngine | None = None


def get_engine() -> EspeakEngine:
    """The process's espeak-ng engine, initialised on first use."""
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = EspeakEngine()
    return _ENGINE


def synthesize(text: str, voice: str = "en-us", rate: int = 175, pitch: int = 50,
               **options) -> tuple[np.ndarray, int]:
    """Speak ``text`` with the process's engine: ``(samples (N,) int16, sample_rate)``."""
    return get_engine().synthesize(text, voice=voice, rate=rate, pitch=pitch, **options)


# ---------------------------------------------------------------- reproducible synthesis
def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _serve() -> int:
    """Server loop: one JSON request per stdin line, a header line plus raw int16 bytes back.

    The server initialises espeak-ng and never synthesizes; each request is spoken by a
    forked child, so every request starts from the same engine state. It ends when the
    client closes stdin or goes away.
    """
    try:
        return _serve_loop()
    except (BrokenPipeError, KeyboardInterrupt):
        return 0


def _serve_loop() -> int:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer

    def reply(header: dict, payload: bytes = b"") -> None:
        stdout.write(json.dumps(header).encode() + b"\n")
        stdout.write(payload)
        stdout.flush()

    try:
        engine = EspeakEngine()
    except EspeakError as e:
        reply({"ok": False, "error": str(e)})
        return 1
    # Load the English voice and dictionary once here (without speaking), so children do
    # not each re-read them from disk; every child still starts from this same state.
    engine._lib.espeak_SetVoiceByName(b"en-us")
    reply({"ok": True, "sample_rate": engine.sample_rate, "version": engine.version})
    # Forked children share the server's memory copy-on-write; keep the collector from
    # touching (and so copying) every object page in each child.
    gc.disable()
    gc.freeze()
    for line in stdin:
        request = json.loads(line)
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: speak once, send the result, exit without cleanup
            try:
                os.close(read_fd)
                try:
                    payload = b"\x00" + engine.synthesize_bytes(**request)
                except Exception as e:  # reported to the client, which raises it
                    payload = b"\x01" + f"{type(e).__name__}: {e}".encode()
                _write_all(write_fd, payload)
            finally:
                os._exit(0)
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as pipe:
            payload = pipe.read()
        _, status = os.waitpid(pid, 0)
        if status != 0 or not payload:
            reply({"ok": False, "error": f"synthesis child died (wait status {status})"})
        elif payload[:1] == b"\x01":
            reply({"ok": False, "error": payload[1:].decode(errors="replace")})
        else:
            reply({"ok": True, "num_bytes": len(payload) - 1}, payload[1:])
    return 0


class IsolatedSynthesizer:
    """Bit-reproducible espeak-ng: the same arguments always give the same samples.

    Starts a server process (see the module docstring) on construction; use it as a
    context manager or call :meth:`close`. Without ``os.fork`` (Windows) it falls back to
    the in-process engine and warns that audio is not bit-reproducible.
    """

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._engine: EspeakEngine | None = None
        if not hasattr(os, "fork"):
            log.warning("os.fork is unavailable: espeak-ng audio will not be bit-reproducible")
            self._engine = get_engine()
            self.sample_rate = self._engine.sample_rate
            self.version = self._engine.version
            return
        self._proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )
        hello = self._read_header()
        if not hello["ok"]:
            self.close()
            raise EspeakError(hello["error"])
        self.sample_rate: int = hello["sample_rate"]
        self.version: str = hello["version"]

    def _read_header(self) -> dict:
        assert self._proc is not None and self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.wait()
            raise EspeakError(f"espeak-ng server exited unexpectedly (exit code {code})")
        return json.loads(line)

    def synthesize(self, text: str, voice: str = "en-us", rate: int = 175, pitch: int = 50,
                   pitch_range: int = 50, seed: int = 0) -> tuple[np.ndarray, int]:
        """Speak ``text``; return ``(samples (N,) int16, sample_rate)``."""
        check_request(text, rate, pitch, pitch_range)
        request = {"text": text, "voice": voice, "rate": int(rate), "pitch": int(pitch),
                   "pitch_range": int(pitch_range), "seed": int(seed)}
        if self._engine is not None:
            return self._engine.synthesize(**request)
        if self._proc is None:
            raise EspeakError("IsolatedSynthesizer is closed")
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(json.dumps(request).encode() + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError as e:
            raise EspeakError(f"espeak-ng server is gone (exit code {self._proc.poll()})") from e
        header = self._read_header()
        if not header["ok"]:
            error = header["error"]
            if error.startswith("ValueError: "):
                raise ValueError(error[len("ValueError: "):])
            if error.startswith("EspeakError: "):
                error = error[len("EspeakError: "):]
            raise EspeakError(error)
        data = self._proc.stdout.read(header["num_bytes"])
        if len(data) != header["num_bytes"]:
            raise EspeakError("espeak-ng server closed the connection mid-reply")
        import numpy as np

        return np.frombuffer(data, dtype=np.int16).copy(), self.sample_rate

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> "IsolatedSynthesizer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the server ends on EOF anyway
            pass


if __name__ == "__main__":
    if sys.argv[1:] != ["--serve"]:
        print("error: python -m asr_pe.data.synth.espeak takes only --serve (the internal espeak-ng server "
              "of asr_pe's synthetic corpus)", file=sys.stderr)
        sys.exit(2)
    sys.exit(_serve())
