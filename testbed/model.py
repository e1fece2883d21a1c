"""Make the test bed's tiny model: a 2-layer Llama config and a locally trained BPE tokenizer.

No weights or tokenizers can be downloaded, so the server runs this config with
``--load-format dummy`` (random weights). Run with the SGLang venv's Python (it needs
``tokenizers``): ``python testbed/model.py OUT_DIR``. Idempotent: an existing complete model is kept.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

VOCAB = 400

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "hidden_act": "silu",
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": VOCAB,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


def _training_text(n_lines: int = 4000) -> list[str]:
    """Deterministic English-like text: the tokenizer only needs a stable, varied vocabulary."""
    words = ("the scheduler batch decode prefill token cache memory request queue running retract "
             "server model layer kernel radix page pool ratio usage stream metric rank stage time "
             "a an of to in on for with and or not is are was be this that it as at by from").split()
    rng = random.Random(7)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(5, 20))) for _ in range(n_lines)]


def make(out: Path) -> Path:
    """Write ``config.json``, ``tokenizer.json``, ``tokenizer_config.json`` and
    ``generation_config.json`` under ``out``; returns ``out``."""
    if (out / "tokenizer.json").exists() and (out / "config.json").exists():
        return out
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_training_text(), trainer=trainer)
    tmp = out / "tokenizer.json.tmp"
    tok.save(str(tmp))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "model_max_length": 4096,
        "chat_template": "{% for m in messages %}{{ m['content'] }}\n{% endfor %}",
    }, indent=1))
    config = dict(CONFIG, vocab_size=max(VOCAB, tok.get_vocab_size()))
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    (out / "config.json").write_text(json.dumps(config, indent=1))
    tmp.rename(out / "tokenizer.json")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: model.py OUT_DIR")
    print(make(Path(sys.argv[1])))
