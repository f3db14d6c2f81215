"""The local generator's threading contract, on a tiny random model with the real transformers
`generate` loop: bounded slots and queue, a stop flag that ends work early, a slot held until the
thread has really finished. (The real SmolLM2 runs in the slow suite.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from service.generate.local import LocalGenerator
from service.generate.protocol import GenerationRecord, GeneratorBusy, Passage

pytestmark = pytest.mark.unit

PASSAGES = [Passage(id="S1", title="Office", text="w1 w2 w3")]


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    # torch + transformers: only when this fixture runs, not at collection
    import torch  # noqa: PLC0415
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: PLC0415

    words = ["<eos>", "<unk>", *(f"w{i}" for i in range(60))]
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, eos_token="<eos>", unk_token="<unk>", pad_token="<eos>"
    )
    tok.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(words),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=8192,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
    )
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = None  # never stops early: only max_tokens or the flag
    return model, tok


async def drain_until_idle(gen: LocalGenerator) -> None:
    async with asyncio.timeout(60):
        for _ in range(6000):
            if not gen.running:
                return
            await asyncio.sleep(0.01)


async def test_streams_text_and_records_tokens(tiny: tuple[Any, Any]) -> None:
    gen = LocalGenerator(*tiny, threads=1)
    record = GenerationRecord()
    pieces = [p async for p in gen.stream("w4 w5?", PASSAGES, max_tokens=12, record=record)]
    await drain_until_idle(gen)
    assert pieces and "".join(pieces).strip()
    assert record.generator == "local" and record.prompt_tokens > 3
    assert record.completion_tokens == 12 and record.finish_reason == "length"
    await gen.aclose()


async def test_busy_slot_and_full_queue_refuse_at_once_and_close_stops_early(
    tiny: tuple[Any, Any],
) -> None:
    gen = LocalGenerator(*tiny, threads=1, slots=1, queue=0)
    record = GenerationRecord()
    first = gen.stream("w4?", PASSAGES, max_tokens=4000, record=record)
    assert await anext(first)
    assert gen.running == 1
    with pytest.raises(GeneratorBusy):
        await anext(gen.stream("w5?", PASSAGES, max_tokens=5))
    await first.aclose()  # sets the stop flag; the thread ends at its next token
    await drain_until_idle(gen)
    assert record.completion_tokens < 4000
    # the slot is free again once the thread has really finished
    assert [p async for p in gen.stream("w6?", PASSAGES, max_tokens=3)]
    await gen.aclose()


async def test_waiters_queue_up_to_the_limit(tiny: tuple[Any, Any]) -> None:
    gen = LocalGenerator(*tiny, threads=1, slots=1, queue=1)
    running = gen.stream("w4?", PASSAGES, max_tokens=4000)
    await anext(running)
    waiter = asyncio.create_task(anext(gen.stream("w5?", PASSAGES, max_tokens=3)))
    await asyncio.sleep(0.05)
    assert gen.waiting == 1
    with pytest.raises(GeneratorBusy):
        await anext(gen.stream("w6?", PASSAGES, max_tokens=3))
    await running.aclose()
    assert await asyncio.wait_for(waiter, 60)  # it got the slot after the first stopped
    await drain_until_idle(gen)
    await gen.aclose()
