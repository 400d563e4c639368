"""A GAN-style loop: each iteration steps two optimizers (the
discriminator's, then the generator's), no annotations; the losses are read
every --read-every iterations. The job's step is one iteration."""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock


def mlp(a, b, width=2048, depth=4):
    layers, d = [], a
    for _ in range(depth):
        layers += [nn.Linear(d, width), nn.LeakyReLU(0.2)]
        d = width
    return nn.Sequential(*layers, nn.Linear(d, b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--read-every", type=int, default=10)
    a = ap.parse_args()
    dev = torch.device("cuda", 0)
    z_dim, x_dim, batch = 256, 1024, 1024
    gen, disc = mlp(z_dim, x_dim).to(dev), mlp(x_dim, 1).to(dev)
    og = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    od = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = torch.randn(batch, x_dim, device=dev)
    ones = torch.ones(batch, 1, device=dev)
    zeros = torch.zeros(batch, 1, device=dev)
    clock = StepClock(a.steps)
    last = (0.0, 0.0)
    for i in range(a.steps):
        clock.mark()
        z = torch.randn(batch, z_dim, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            fake = gen(z)
            d_loss = F.binary_cross_entropy_with_logits(disc(real), ones) + \
                F.binary_cross_entropy_with_logits(disc(fake.detach()), zeros)
        od.zero_grad(set_to_none=True)
        d_loss.backward()
        od.step()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            g_loss = F.binary_cross_entropy_with_logits(disc(fake), ones)
        og.zero_grad(set_to_none=True)
        g_loss.backward()
        og.step()
        if (i + 1) % a.read_every == 0:
            last = (d_loss.item(), g_loss.item())
    clock.say(5, losses=last, workload="gan_two_optim")


if __name__ == "__main__":
    main()
