"""Make the tiny model the real-engine lane serves (run with the real engine's own Python).

No weights can be downloaded on the machines Tandem is tested on, so the model is made on the spot: a
two-layer Llama with random weights (seeded, so every machine makes the same one) and a byte-level BPE
tokenizer trained on a fixed text, with a chat template that renders tools, tool calls and tool results
in Hermes' format (vLLM serves tool calls for it with ``--tool-call-parser hermes``). Its output is
gibberish, but everything an engine does with a model is real: tokenization, prefix caching, queueing,
KV blocks, its metrics and its API answers. End-of-sequence is a real token of the vocabulary, yet the
random weights hardly ever pick it: answers run to ``max_tokens`` (300 of 300 tokens, seen here).
A model made with another template, context or seed than the marker file records is made anew.

    python -m realengine.model DIR [--context N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

VOCAB = 2048
CONTEXT = 32768  # coding assistants open with 10k-20k tokens
SEED = 20261202
SPECIAL = ["<|pad|>", "<|bos|>", "<|eos|>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>"]
CHAT_TEMPLATE = (  # Hermes' tool-call format, so vLLM's ``hermes`` tool parser reads the model's output
    '{{ bos_token }}{% if tools %}<|system|>Call a tool as <tool_call>{"name": ..., "arguments": ...}'
    "</tool_call>. Tools: <tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>{{ eos_token }}"
    "{% endif %}{% for m in messages %}"
    "{% set content = '' if m['content'] is none else m['content'] if m['content'] is string else "
    "(m['content'] | map(attribute='text') | select('defined') | join('\\n')) %}"
    "<|{{ m['role'] }}|>{{ content }}"
    "{% for call in m['tool_calls'] or [] %}<tool_call>"
    "{{ {'name': call['function']['name'], 'arguments': call['function']['arguments']} | tojson }}"
    "</tool_call>{% endfor %}{{ eos_token }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
MARKER = "tandem-model.json"


def corpus() -> list[str]:
    """A fixed text to train the tokenizer on: English words, code and numbers, as prompts carry."""
    words = (
        "the of and to in is for that on with as it be this by are from at an or have not prefill decode "
        "cache token request model server cluster topology transfer latency throughput question answer "
        "summarise reply sentence def return import class self if else for while true false none json "
        "http get post status error alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo "
        "lima mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
    ).split()
    lines = []
    for n in range(4000):
        picked = [words[(n * 7 + k * 13) % len(words)] for k in range(12)]
        lines.append(" ".join(picked) + f" {n} {n * 31 % 997}-{n % 17}: ({{}}) [] = + - * / ; , . ? !")
    return lines


def made_as(context: int) -> dict[str, object]:
    """What the marker records: a model made otherwise (another context, seed or template) is made anew."""
    template = hashlib.sha256(CHAT_TEMPLATE.encode()).hexdigest()[:16]
    return {"vocab": VOCAB, "context": context, "seed": SEED, "template": template}


def make(directory: Path, *, context: int = CONTEXT) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|bos|>",
        eos_token="<|eos|>",
        pad_token="<|pad|>",
        model_max_length=context,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(directory)
    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=context,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # end-of-sequence gets a push, so answers end before max_tokens
        model.lm_head.weight[fast.eos_token_id] *= 0.0
        model.model.embed_tokens.weight[fast.eos_token_id] += model.model.embed_tokens.weight.mean(0) * 4
    model.to(torch.bfloat16).save_pretrained(directory)
    (directory / MARKER).write_text(json.dumps(made_as(context)))
    return directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--context", type=int, default=CONTEXT)
    args = parser.parse_args(argv)
    marker = args.directory / MARKER
    if marker.exists() and json.loads(marker.read_text()) == made_as(args.context):
        print(args.directory)
        return 0
    print(make(args.directory, context=args.context))
    return 0


if __name__ == "__main__":
    sys.exit(main())
