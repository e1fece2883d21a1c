"""Stand-in for SGLang's compiled ``sgl_kernel`` package, for the real-server test bed on a CPU.

The package index carries no CPU build of ``sgl_kernel``. With ``SGLANG_USE_CPU_ENGINE=1`` on a CPU
without AMX, SGLang's model layers take their plain-PyTorch paths and only these bookkeeping ops
are called (SGLang 0.5.18-0.5.23):

* ``assign_req_to_token_pool_cpu`` (``sglang/srt/mem_cache/allocation.py``): writes the KV slots
  of each request into the request-to-token table; the same arithmetic as SGLang's Triton kernel
  ``assign_req_to_token_pool``.
* ``copy_all_layer_kv_cache_cpu`` (``sglang/kernels/ops/kvcache/cache_move.py``): moves KV slots
  of every layer buffer, given raw data pointers and per-buffer strides in bytes.
* ``murmur_hash32_cpu`` (``sglang/kernels/ops/sampling/murmur_hash.py``, seeded sampling, which
  SGLang Omni's stages use): a torch op ``torch.ops.sgl_kernel.murmur_hash32_cpu(seed, positions,
  col_indices)`` giving the ``(rows, cols)`` uint32 MurmurHash3 x86_32 of the four 4-byte words
  ``seed_low, seed_high, position, col`` of each row and column, as SGLang's Triton kernel
  ``murmur_hash32_kernel`` computes it (tests/test_real_omni.py checks it against a scalar murmur3).

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


_M32 = 0xFFFFFFFF


def _mix(h, k):
    """One murmur3 block on int64 tensors holding uint32 values."""
    k = (k * 0xCC9E2D51) & _M32
    k = ((k << 15) | (k >> 17)) & _M32
    k = (k * 0x1B873593) & _M32
    h = h ^ k
    h = ((h << 13) | (h >> 19)) & _M32
    return (h * 5 + 0xE6546B64) & _M32


def _fmix(h):
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & _M32
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & _M32
    return h ^ (h >> 16)


def murmur_hash32(seed, positions, col_indices):
    """``(n,)`` seeds (uint64/int64), ``(n,)`` positions, ``(m,)`` columns -> ``(n, m)`` uint32:
    MurmurHash3 x86_32 (seed 0) of ``seed_low, seed_high, position, col`` (16 bytes)."""
    s = seed.to(torch.int64)
    lo, hi = s & _M32, (s >> 32) & _M32
    h = _mix(_mix(torch.zeros_like(s), lo), hi)
    h = _mix(h, positions.to(torch.int64) & _M32)
    h = _mix(h[:, None], (col_indices.to(torch.int64) & _M32)[None, :])
    return _fmix(h ^ 16).to(torch.uint32)


murmur_hash32_cpu = murmur_hash32
_LIB = torch.library.Library("sgl_kernel", "DEF")  # SGLang calls it as a torch op
_LIB.define("murmur_hash32_cpu(Tensor seed, Tensor positions, Tensor col_indices) -> Tensor")
_LIB.impl("murmur_hash32_cpu", murmur_hash32, "CPU")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    def _missing(*_a, **_k):
        raise NotImplementedError(f"sgl_kernel.{name}: not in the test bed's CPU stand-in")

    _missing.__name__ = name
    return _missing
