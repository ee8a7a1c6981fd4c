"""transformers' `generate` on tiny random decoder models: greedy, sampling, beam search, a
static cache, several model families. Nothing is downloaded: each model is built from a config.
Sampling runs its full length (`min_new_tokens`), so where it stops does not depend on the random
numbers, which differ between a GPU and the emulated device."""

from __future__ import annotations

from typing import Any

import torch

from harness.programs.registry import Step, program

VOCAB = 96
_NEEDS = ("transformers",)


def _tiny(family: str) -> Any:
    import transformers

    common = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4)
    configs = {
        "llama": lambda: transformers.LlamaConfig(
            **common, intermediate_size=64, num_key_value_heads=2, max_position_embeddings=64
        ),
        "qwen2": lambda: transformers.Qwen2Config(
            **common, intermediate_size=64, num_key_value_heads=2, max_position_embeddings=64
        ),
        "mistral": lambda: transformers.MistralConfig(
            **common,
            intermediate_size=64,
            num_key_value_heads=2,
            max_position_embeddings=64,
            sliding_window=8,
        ),
        "gpt2": lambda: transformers.GPT2Config(
            vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64
        ),
    }
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(configs[family]())
    return model.eval()


def _prompt(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Two prompts of 6 tokens, the second left-padded by 2."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (2, 6), generator=g)
    mask = torch.ones(2, 6, dtype=torch.long)
    ids[1, :2], mask[1, :2] = 0, 0
    return ids.to(device), mask.to(device)


def _generate(family: str, device: torch.device, **kwargs: Any) -> Step:
    model = _tiny(family).to(device)
    ids, mask = _prompt(device)

    def step() -> torch.Tensor:
        torch.manual_seed(2)
        with torch.no_grad():
            return model.generate(ids, attention_mask=mask, pad_token_id=0, **kwargs)

    return step


@program("transformers", "Llama, greedy, 8 new tokens", needs=_NEEDS)
def hf_llama_greedy(device: torch.device) -> Step:
    return _generate("llama", device, max_new_tokens=8, do_sample=False)


@program(
    "transformers",
    "GPT-2, sampling: temperature, top-k, top-p, repetition penalty, eos",
    needs=_NEEDS,
)
def hf_gpt2_sampling(device: torch.device) -> Step:
    return _generate(
        "gpt2",
        device,
        max_new_tokens=8,
        min_new_tokens=8,
        do_sample=True,
        temperature=0.8,
        top_k=20,
        top_p=0.9,
        repetition_penalty=1.3,
        eos_token_id=1,
    )


@program("transformers", "GPT-2, beam search (3 beams), 6 new tokens", needs=_NEEDS)
def hf_gpt2_beam(device: torch.device) -> Step:
    return _generate("gpt2", device, max_new_tokens=6, num_beams=3, do_sample=False)


@program("transformers", "Llama, greedy with a static KV cache (not compiled)", needs=_NEEDS)
def hf_llama_static_cache(device: torch.device) -> Step:
    return _generate(
        "llama",
        device,
        max_new_tokens=6,
        do_sample=False,
        cache_implementation="static",
        disable_compile=True,
    )


@program("transformers", "Qwen2, greedy, 8 new tokens", needs=_NEEDS)
def hf_qwen2_greedy(device: torch.device) -> Step:
    return _generate("qwen2", device, max_new_tokens=8, do_sample=False)


@program("transformers", "Mistral with a sliding window of 8, greedy past it", needs=_NEEDS)
def hf_mistral_sliding_window(device: torch.device) -> Step:
    return _generate("mistral", device, max_new_tokens=8, do_sample=False)


@program(
    "transformers",
    "GPT-2 moved to the device in the measured step (its tied embedding moves once), greedy",
    needs=_NEEDS,
)
def hf_gpt2_to_device(device: torch.device) -> Step:
    model = _tiny("gpt2")
    ids, mask = _prompt(device)

    def step() -> torch.Tensor:
        moved = model.to(device)
        with torch.no_grad():
            return moved.generate(
                ids, attention_mask=mask, pad_token_id=0, max_new_tokens=4, do_sample=False
            )

    return step
