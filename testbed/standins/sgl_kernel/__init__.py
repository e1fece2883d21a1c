"""Stand-in for SGLang's compiled ``sgl_kernel`` package, for the real-server test bed on a CPU.

The package index carries no CPU build of ``sgl_kernel``. With ``SGLANG_USE_CPU_ENGINE=1`` on a CPU
without AMX, SGLang's model layers take their plain-PyTorch paths and only these bookkeeping ops
are called (SGLang 0.5.18-0.5.23):

* ``assign_req_to_token_pool_cpu`` (``sglang/srt/mem_cache/allocation.py``): writes the KV slots
  of each request into the request-to-token table; the same arithmetic as SGLang's Triton kernel
  ``assign_req_to_token_pool``.
* ``copy_all_layer_kv_cache_cpu`` (``sglang/kernels/ops/kvcache/cache_move.py``): moves KV slots
  of every layer buffer, given raw data pointers and per-buffer strides in bytes.
* ``murmur_hash32_cpu`` (SGLang Omni's seeded sampling): MurmurHash3 x86_32 of each row.

Nothing here touches the scheduler, its logging, its metrics or the forward-pass publisher. Every
other name raises ``NotImplementedError`` when called, so that a new code path shows at once.
"""

from __future__ import annotations

import ctypes

import torch

__version__ = "0.0.0+exporter-testbed"


def assign_req_to_token_pool_cpu(req_pool_indices, req_to_token, start_offset, end_offset,
                                 out_cache_loc, pool_len):
    """``req_to_token[req_pool_indices[i], start[i]:end[i]] = out_cache_loc[o_i:o_i + end[i] - start[i]]``
    where ``o_i`` is the sum of the earlier requests' lengths (in place, int tensors)."""
    starts = start_offset.tolist()
    ends = end_offset.tolist()
    rows = req_pool_indices.tolist()
    o = 0
    for row, s, e in zip(rows, starts, ends):
        n = e - s
        if n > 0:
            req_to_token[row, s:e] = out_cache_loc[o:o + n].to(req_to_token.dtype)
        o += n


def copy_all_layer_kv_cache_cpu(data_ptrs, strides, tgt_loc, src_loc):
    """For every buffer ``b`` (base address ``data_ptrs[b]``, ``strides[b]`` bytes per slot), copy
    slot ``src_loc[j]`` onto slot ``tgt_loc[j]`` (all sources are read before any target is written,
    as the kernel reads a tile before it stores it)."""
    src = src_loc.tolist()
    tgt = tgt_loc.tolist()
    for base, stride in zip(data_ptrs.tolist(), strides.tolist()):
        saved = [ctypes.string_at(base + s * stride, stride) for s in src]
        for t, data in zip(tgt, saved):
            ctypes.memmove(base + t * stride, data, stride)


def _fmix32(h):
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def _murmur3_32(words, seed):
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & 0xFFFFFFFF
    for k in words:
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= (len(words) * 4) & 0xFFFFFFFF
    return _fmix32(h)


def murmur_hash32_cpu(data, seed=0):
    """MurmurHash3 x86_32 of each row of an int32/int64 tensor (each element as a 4-byte word)."""
    flat = data.reshape(data.shape[0], -1) if data.dim() > 1 else data.reshape(-1, 1)
    out = [_murmur3_32([int(x) & 0xFFFFFFFF for x in row], int(seed)) for row in flat.tolist()]
    return torch.tensor([v - (1 << 32) if v >= 1 << 31 else v for v in out], dtype=torch.int32)


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    def _missing(*_a, **_k):
        raise NotImplementedError(f"sgl_kernel.{name}: not in the test bed's CPU stand-in")

    _missing.__name__ = name
    return _missing
