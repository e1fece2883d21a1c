"""Make the test bed's tiny Qwen3-Omni: config, word-level tokenizer, processor, random weights.

Nothing can be downloaded, so the model is made here with transformers' own Qwen3-Omni classes
(``Qwen3OmniMoeConfig``, ``Qwen3OmniMoeForConditionalGeneration``) at a few dozen hidden units a
layer, with weights drawn from a fixed seed and saved as safetensors (deterministic). Qwen's special
tokens sit at their real ids (151643-151675, user 872, system 8948, assistant 77091): SGLang Omni
reads several of them from the config and the tokenizer. What Omni 0.1.9 asks of a checkpoint
(``docs/testbed.md``): 128 talker experts (it rebuilds the talker config from transformers 5's
``to_dict()``, where the count is ``num_local_experts``, so its own default of 128 wins), an NFC
normalizer on the tokenizer, ``tokens_per_second`` in the vision config, and the thinker's experts
stored one tensor per expert, as real checkpoints are.

Run with the Omni stack's Python (transformers 5.19): ``python testbed/omni_model.py OUT_DIR``.
Idempotent: an existing complete model is kept.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SEED = 28
HIDDEN = 64
#: Qwen's special tokens, at their real ids.
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
           "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
           "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
           "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
           "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
           "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>",
           "<tts_text_bos_single>", "<|audio_pad|>"]
FIRST_SPECIAL = 151643
VOCAB = 151936
ROLES = {"user": 872, "system": 8948, "assistant": 77091}
WORDS = ("the scheduler batch decode prefill token cache memory request queue running retract server "
         "model layer kernel radix page pool ratio usage stream metric rank stage time speech audio text "
         "talker thinker say hello world a an of to in on for with and or not is are was be this that "
         "it as at by from you can please tell me about one two three four five yes no").split()
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'text' %}{{ c['text'] }}"
    "{% elif c['type'] in ('image', 'image_url') %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] in ('audio', 'audio_url', 'input_audio') %}<|audio_start|><|audio_pad|><|audio_end|>"
    "{% elif c['type'] in ('video', 'video_url') %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _rope(head_dim: int) -> dict:
    """Qwen3-Omni's interleaved multimodal rope, its sections scaled to ``head_dim``."""
    half = head_dim // 2
    return {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [half // 2, half // 4, half // 4],
            "interleaved": True, "mrope_interleaved": True}


def config_dict() -> dict:
    """The config: Qwen3-Omni's structure and token ids, tiny sizes."""
    head = 16
    ids = {"audio_token_id": 151675, "image_token_id": 151655, "video_token_id": 151656,
           "audio_start_token_id": 151669, "audio_end_token_id": 151670,
           "vision_start_token_id": 151652, "vision_end_token_id": 151653}
    text = {"vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": head, "moe_intermediate_size": 32,
            "num_experts": 8, "num_experts_per_tok": 2, "max_position_embeddings": 4096,
            "rope_scaling": _rope(head), "rope_parameters": _rope(head), "tie_word_embeddings": False}
    talker_text = {"vocab_size": 3072, "hidden_size": HIDDEN, "intermediate_size": 128, "num_hidden_layers": 2,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": head,
                   "moe_intermediate_size": 16, "shared_expert_intermediate_size": 32,
                   "num_experts": 128, "num_local_experts": 128, "num_experts_per_tok": 2,
                   "max_position_embeddings": 4096, "rope_scaling": _rope(head), "rope_parameters": _rope(head)}
    return {
        "architectures": ["Qwen3OmniMoeForConditionalGeneration"], "model_type": "qwen3_omni_moe",
        "enable_audio_output": True, "im_start_token_id": 151644, "im_end_token_id": 151645,
        "tts_pad_token_id": 151671, "tts_bos_token_id": 151672, "tts_eos_token_id": 151673,
        "system_token_id": 8948, "user_token_id": 872, "assistant_token_id": 77091,
        "thinker_config": {
            **ids, "user_token_id": 872, "position_id_per_seconds": 13, "seconds_per_chunk": 2,
            "audio_config": {"num_mel_bins": 128, "encoder_layers": 1, "encoder_attention_heads": 4,
                             "encoder_ffn_dim": 128, "d_model": HIDDEN, "output_dim": HIDDEN,
                             "downsample_hidden_size": 32, "n_window": 50, "n_window_infer": 800,
                             "conv_chunksize": 500, "max_source_positions": 1500},
            "vision_config": {"depth": 3, "hidden_size": HIDDEN, "intermediate_size": 128, "num_heads": 4,
                              "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
                              "out_hidden_size": HIDDEN, "num_position_embeddings": 2304,
                              "deepstack_visual_indexes": [0, 1, 2], "tokens_per_second": 2},
            "text_config": text,
        },
        "talker_config": {
            **ids, "num_code_groups": 16, "thinker_hidden_size": HIDDEN, "accept_hidden_layer": 1,
            "codec_eos_token_id": 2150, "codec_nothink_id": 2155, "codec_think_bos_id": 2156,
            "codec_think_eos_id": 2157, "codec_pad_id": 2148, "codec_bos_id": 2149,
            "position_id_per_seconds": 13, "spatial_merge_size": 2, "speaker_id": {"chelsie": 2301, "ethan": 2302, "aiden": 2303},
            "text_config": talker_text,
            "code_predictor_config": {"vocab_size": 2048, "hidden_size": HIDDEN, "intermediate_size": 128,
                                      "num_hidden_layers": 1, "num_attention_heads": 4,
                                      "num_key_value_heads": 2, "head_dim": head, "num_code_groups": 16,
                                      "max_position_embeddings": 4096},
        },
        "code2wav_config": {"codebook_size": 2048, "hidden_size": HIDDEN, "num_hidden_layers": 1,
                            "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128,
                            "num_quantizers": 16, "decoder_dim": 64, "sliding_window": 72,
                            "upsample_rates": [8, 5, 4, 3], "upsampling_ratios": [2, 2],
                            "max_position_embeddings": 8000},
    }


def _tokenizer(out: Path) -> None:
    """A word-level tokenizer with an NFC normalizer (Omni's preprocessing asserts one)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "\n": 1}
    for w in WORDS:
        vocab.setdefault(w, len(vocab))
    vocab.update(ROLES)
    vocab.update({t: FIRST_SPECIAL + i for i, t in enumerate(SPECIAL)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(pattern=Regex("\n"), behavior="isolated"),
                                                 pre_tokenizers.Split(pattern=" ", behavior="removed")])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with a space
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", additional_special_tokens=SPECIAL,
                                   model_max_length=4096, extra_special_tokens={
                                       "image_token": "<|image_pad|>", "audio_token": "<|audio_pad|>",
                                       "video_token": "<|video_pad|>", "vision_bos_token": "<|vision_start|>",
                                       "vision_eos_token": "<|vision_end|>", "audio_bos_token": "<|audio_start|>",
                                       "audio_eos_token": "<|audio_end|>"})
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))


def _processor(out: Path) -> None:
    """Qwen3-Omni's processor (Whisper features, Qwen2-VL images and video) on that tokenizer."""
    from transformers import (AutoTokenizer, Qwen2VLImageProcessor, Qwen3OmniMoeProcessor,
                              WhisperFeatureExtractor)
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    proc = Qwen3OmniMoeProcessor(
        image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2),
        video_processor=Qwen3VLVideoProcessor(patch_size=16, merge_size=2, temporal_patch_size=2),
        feature_extractor=WhisperFeatureExtractor(feature_size=128),
        tokenizer=AutoTokenizer.from_pretrained(str(out)), chat_template=CHAT_TEMPLATE)
    proc.save_pretrained(str(out))


def _weights(out: Path, config: dict) -> int:
    """Random weights from :data:`SEED`, the experts one tensor each; returns the parameter count."""
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen3OmniMoeConfig, Qwen3OmniMoeForConditionalGeneration

    torch.manual_seed(SEED)
    random.seed(SEED)
    model = Qwen3OmniMoeForConditionalGeneration(Qwen3OmniMoeConfig(**config)).to(torch.bfloat16)
    tensors = {}
    for name, t in model.state_dict().items():
        # transformers 5.19 fuses each layer's experts: gate_up_proj (experts, 2 x inter, hidden),
        # down_proj (experts, hidden, inter), each expert's slice already (out, in) as checkpoints store it
        if name.endswith("mlp.experts.gate_up_proj"):
            for e in range(t.shape[0]):
                gate, up = t[e].chunk(2, dim=0)
                tensors[name.replace("gate_up_proj", f"{e}.gate_proj.weight")] = gate.contiguous()
                tensors[name.replace("gate_up_proj", f"{e}.up_proj.weight")] = up.contiguous()
        elif name.endswith("mlp.experts.down_proj"):
            for e in range(t.shape[0]):
                tensors[name.replace("down_proj", f"{e}.down_proj.weight")] = t[e].contiguous()
        else:
            tensors[name] = t.contiguous()
    save_file({k: v.clone() for k, v in tensors.items()}, str(out / "model.safetensors.tmp"),
              metadata={"format": "pt"})
    return sum(t.numel() for t in tensors.values())


def make(out: Path) -> Path:
    """Write the model under ``out``; returns ``out``."""
    if (out / "model.safetensors").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    config = config_dict()
    _tokenizer(out)
    _processor(out)
    n = _weights(out, config)
    (out / "config.json").write_text(json.dumps(dict(config, torch_dtype="bfloat16"), indent=1))
    (out / "generation_config.json").write_text(json.dumps({"eos_token_id": [151645, 151643],
                                                            "pad_token_id": 151643}))
    (out / "model.safetensors.tmp").rename(out / "model.safetensors")
    print(f"tiny Qwen3-Omni: {n} parameters")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: omni_model.py OUT_DIR")
    print(make(Path(sys.argv[1])))
