"""Token-by-token decoding with no optimizer and no annotations: each
token is a forward pass of a small decoder over a growing KV cache, then
`argmax().item()` (a host sync per token) picks the next token on the host."""

import argparse

import torch
import torch.nn as nn

from common import StepClock


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x, cache):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).split(d, dim=-1)
        cache.append((k, v))
        ks = torch.cat([c[0] for c in cache], 1)
        vs = torch.cat([c[1] for c in cache], 1)
        sh = lambda z: z.view(b, -1, self.h, d // self.h).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(sh(q), sh(ks), sh(vs))
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.n2(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=80)
    a = ap.parse_args()
    dev = torch.device("cuda", 0)
    d, h, L, vocab = 1024, 16, 8, 32000
    blocks = nn.ModuleList(Block(d, h) for _ in range(L)).to(dev, torch.bfloat16).eval()
    emb = nn.Embedding(vocab, d).to(dev, torch.bfloat16)
    head = nn.Linear(d, vocab).to(dev, torch.bfloat16)
    caches = [[] for _ in range(L)]
    tok = 1
    clock = StepClock(a.tokens)
    with torch.no_grad():
        for _ in range(a.tokens):
            clock.mark()
            x = emb(torch.tensor([[tok]], device=dev))
            for b, c in zip(blocks, caches):
                x = b(x, c)
            tok = int(head(x[:, -1]).argmax().item())
    clock.say(5, workload="decode_tokens")


if __name__ == "__main__":
    main()
