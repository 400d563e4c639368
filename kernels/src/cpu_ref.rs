//! CPU reference of one MLP block's forward and backward, and of the seeded
//! initialisation, used to check the GPU path (tests/gpu.rs).
//!
//! Block (row-major, T tokens, width d, flat parameters `[W1 | W2]`):
//! `a = x W1^T` (T x 4d), `g = gelu(a)`, `y = x + g W2^T`; loss
//! `sum 0.5 (y - t)^2 / count`. Backward: `dW2 = dy^T g`, `dg = dy W2`,
//! `da = dg * gelu'(a)`, `dW1 = da^T x`, `dx = dy + da W1`. With
//! [`Rounding::Bf16`] every tensor the GPU stores in bf16 is rounded at the
//! same point (GEMMs accumulate in f32 and round once on output).

use crate::bf16::round_bf16;

/// splitmix64 finaliser, identical to `mix64` in cuda/fsdp_kernels.cu.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Uniform value in [-1, 1) for (seed, stream, index), bit-identical to the GPU's.
pub fn uniform_pm1(seed: u64, stream: u64, idx: u64) -> f32 {
    let h = mix64(mix64(seed ^ stream.wrapping_mul(0xd134_2543_de82_ef95)).wrapping_add(idx));
    (h >> 40) as f32 * (2.0 / 16_777_216.0) - 1.0
}

/// Random streams of the seeded data: block `l`'s parameters use `PARAM_STREAM + l`.
pub const INPUT_STREAM: u64 = 1;
pub const TARGET_STREAM: u64 = 2;
pub const PARAM_STREAM: u64 = 1000;

/// Init scales: uniform(-s, s) has variance s^2/3, so s = sqrt(3 / fan_in).
pub fn init_scales(dim: usize) -> (f32, f32) {
    ((3.0 / dim as f32).sqrt(), (3.0 / (4 * dim) as f32).sqrt())
}

/// Block `layer`'s flat fp32 master parameters as the GPU initialises them.
pub fn init_block_params(seed: u64, layer: usize, dim: usize) -> Vec<f32> {
    let (s1, s2) = init_scales(dim);
    let w1 = 4 * dim * dim;
    (0..8 * dim * dim)
        .map(|i| {
            let s = if i < w1 { s1 } else { s2 };
            uniform_pm1(seed, PARAM_STREAM + layer as u64, i as u64) * s
        })
        .collect()
}

/// Input or target rows [first_token, first_token + tokens) as bf16-rounded values.
pub fn init_rows(
    seed: u64,
    stream: u64,
    first_token: usize,
    tokens: usize,
    dim: usize,
) -> Vec<f32> {
    let offset = (first_token * dim) as u64;
    (0..tokens * dim)
        .map(|i| round_bf16(uniform_pm1(seed, stream, offset + i as u64)))
        .collect()
}

/// Whether intermediate tensors are rounded to bf16 like the GPU's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    Bf16,
    Exact,
}

impl Rounding {
    fn apply(self, v: f32) -> f32 {
        match self {
            Rounding::Bf16 => round_bf16(v),
            Rounding::Exact => v,
        }
    }
}

pub fn gelu(x: f32) -> f32 {
    let k = 0.797_884_6_f32;
    let u = k * (x + 0.044715 * x * x * x);
    0.5 * x * (1.0 + u.tanh())
}

pub fn gelu_grad(x: f32) -> f32 {
    let k = 0.797_884_6_f32;
    let x2 = x * x;
    let t = (k * (x + 0.044715 * x2 * x)).tanh();
    let du = k * (1.0 + 3.0 * 0.044715 * x2);
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
}

/// Everything one block's forward and backward produce.
#[derive(Clone, Debug)]
pub struct BlockResult {
    pub a: Vec<f32>,
    pub g: Vec<f32>,
    pub y: Vec<f32>,
    pub loss: f32,
    pub dy: Vec<f32>,
    /// Flat `[dW1 | dW2]`, f32 like the GPU's gradient buffer.
    pub dw: Vec<f32>,
    pub dx: Vec<f32>,
}

/// Runs one block on `x` (T x d) with flat weights `w` (8 d^2, already as the
/// GPU holds them) against target `t`; `inv_count` scales loss and gradient.
pub fn block_forward_backward(
    x: &[f32],
    w: &[f32],
    t: &[f32],
    tokens: usize,
    dim: usize,
    inv_count: f32,
    r: Rounding,
) -> BlockResult {
    let h = 4 * dim;
    let (w1, w2) = w.split_at(h * dim); // W1: h x d, W2: d x h
    let mut a = vec![0.0f32; tokens * h];
    let mut g = vec![0.0f32; tokens * h];
    for i in 0..tokens {
        for j in 0..h {
            let mut s = 0.0f32;
            for k in 0..dim {
                s += x[i * dim + k] * w1[j * dim + k];
            }
            a[i * h + j] = r.apply(s);
            g[i * h + j] = r.apply(gelu(a[i * h + j]));
        }
    }
    let mut y = vec![0.0f32; tokens * dim];
    for i in 0..tokens {
        for j in 0..dim {
            let mut s = 0.0f32;
            for k in 0..h {
                s += g[i * h + k] * w2[j * h + k];
            }
            y[i * dim + j] = r.apply(x[i * dim + j] + s);
        }
    }
    let mut loss = 0.0f32;
    let mut dy = vec![0.0f32; tokens * dim];
    for (i, (yi, ti)) in y.iter().zip(t).enumerate() {
        let d = yi - ti;
        loss += 0.5 * d * d * inv_count;
        dy[i] = r.apply(d * inv_count);
    }
    let mut dw = vec![0.0f32; 8 * dim * dim];
    let (dw1, dw2) = dw.split_at_mut(h * dim);
    // dW2 (d x h) = dy^T g
    for j in 0..dim {
        for k in 0..h {
            let mut s = 0.0f32;
            for i in 0..tokens {
                s += dy[i * dim + j] * g[i * h + k];
            }
            dw2[j * h + k] = s;
        }
    }
    // dg (T x h) = dy W2; da = dg * gelu'(a)
    let mut da = vec![0.0f32; tokens * h];
    for i in 0..tokens {
        for k in 0..h {
            let mut s = 0.0f32;
            for j in 0..dim {
                s += dy[i * dim + j] * w2[j * h + k];
            }
            let dg = r.apply(s);
            da[i * h + k] = r.apply(dg * gelu_grad(a[i * h + k]));
        }
    }
    // dW1 (h x d) = da^T x
    for k in 0..h {
        for c in 0..dim {
            let mut s = 0.0f32;
            for i in 0..tokens {
                s += da[i * h + k] * x[i * dim + c];
            }
            dw1[k * dim + c] = s;
        }
    }
    // dx (T x d) = dy + da W1
    let mut dx = vec![0.0f32; tokens * dim];
    for i in 0..tokens {
        for c in 0..dim {
            let mut s = 0.0f32;
            for k in 0..h {
                s += da[i * h + k] * w1[k * dim + c];
            }
            dx[i * dim + c] = r.apply(dy[i * dim + c] + s);
        }
    }
    BlockResult {
        a,
        g,
        y,
        loss,
        dy,
        dw,
        dx,
    }
}

/// Largest |a - b| / (atol + rtol |b|) over two tensors: <= 1 means they agree.
pub fn worst_mismatch(a: &[f32], b: &[f32], atol: f32, rtol: f32) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / (atol + rtol * y.abs()))
        .fold(0.0f32, f32::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_is_in_range_and_seeded() {
        let v: Vec<f32> = (0..10_000).map(|i| uniform_pm1(7, 3, i)).collect();
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        let mean = v.iter().sum::<f32>() / v.len() as f32;
        assert!(mean.abs() < 0.03, "{mean}");
        assert_ne!(uniform_pm1(7, 3, 0), uniform_pm1(8, 3, 0));
        assert_ne!(uniform_pm1(7, 3, 0), uniform_pm1(7, 4, 0));
        assert_eq!(uniform_pm1(7, 3, 5), uniform_pm1(7, 3, 5));
    }

    #[test]
    fn init_params_use_fan_in_scales() {
        let p = init_block_params(1, 0, 16);
        let (s1, s2) = init_scales(16);
        let w1 = 4 * 16 * 16;
        assert!(p[..w1].iter().all(|v| v.abs() <= s1));
        assert!(p[w1..].iter().all(|v| v.abs() <= s2));
        assert!(p[..w1].iter().any(|v| v.abs() > s2));
    }

    #[test]
    fn rows_are_independent_of_how_tokens_are_split() {
        let all = init_rows(3, INPUT_STREAM, 0, 8, 16);
        let second_half = init_rows(3, INPUT_STREAM, 4, 4, 16);
        assert_eq!(&all[4 * 16..], &second_half[..]);
    }

    #[test]
    fn gelu_grad_matches_finite_difference() {
        for x in [-3.0f32, -1.0, -0.1, 0.0, 0.3, 1.7, 4.0] {
            let h = 1e-2f32;
            let fd = (gelu(x + h) - gelu(x - h)) / (2.0 * h);
            assert!(
                (fd - gelu_grad(x)).abs() < 1e-3,
                "x={x}: {fd} vs {}",
                gelu_grad(x)
            );
        }
    }

    fn loss_of(x: &[f32], w: &[f32], t: &[f32], tokens: usize, dim: usize, inv: f32) -> f64 {
        block_forward_backward(x, w, t, tokens, dim, inv, Rounding::Exact).loss as f64
    }

    #[test]
    fn backward_matches_finite_differences() {
        let (tokens, dim) = (3, 8);
        let inv = 1.0 / (tokens * dim) as f32;
        let x = init_rows(5, INPUT_STREAM, 0, tokens, dim);
        let t = init_rows(5, TARGET_STREAM, 0, tokens, dim);
        let w = init_block_params(5, 0, dim);
        let r = block_forward_backward(&x, &w, &t, tokens, dim, inv, Rounding::Exact);
        let h = 1e-2f32;
        // Weight gradients: a few entries of W1 and of W2.
        for &i in &[
            0usize,
            17,
            4 * dim * dim - 1,
            4 * dim * dim,
            8 * dim * dim - 3,
        ] {
            let mut wp = w.clone();
            wp[i] += h;
            let mut wm = w.clone();
            wm[i] -= h;
            let fd = (loss_of(&x, &wp, &t, tokens, dim, inv)
                - loss_of(&x, &wm, &t, tokens, dim, inv))
                / (2.0 * h as f64);
            let an = r.dw[i] as f64;
            assert!(
                (fd - an).abs() < 1e-4 + 1e-2 * an.abs(),
                "dw[{i}]: fd {fd} vs {an}"
            );
        }
        // Input gradient.
        for &i in &[0usize, 5, tokens * dim - 1] {
            let mut xp = x.clone();
            xp[i] += h;
            let mut xm = x.clone();
            xm[i] -= h;
            let fd = (loss_of(&xp, &w, &t, tokens, dim, inv)
                - loss_of(&xm, &w, &t, tokens, dim, inv))
                / (2.0 * h as f64);
            let an = r.dx[i] as f64;
            assert!(
                (fd - an).abs() < 1e-4 + 1e-2 * an.abs(),
                "dx[{i}]: fd {fd} vs {an}"
            );
        }
    }

    #[test]
    fn bf16_rounding_stays_close_to_exact() {
        let (tokens, dim) = (4, 16);
        let inv = 1.0 / (tokens * dim) as f32;
        let x = init_rows(9, INPUT_STREAM, 0, tokens, dim);
        let t = init_rows(9, TARGET_STREAM, 0, tokens, dim);
        let w: Vec<f32> = init_block_params(9, 0, dim)
            .into_iter()
            .map(round_bf16)
            .collect();
        let e = block_forward_backward(&x, &w, &t, tokens, dim, inv, Rounding::Exact);
        let b = block_forward_backward(&x, &w, &t, tokens, dim, inv, Rounding::Bf16);
        assert!(worst_mismatch(&b.y, &e.y, 1e-2, 2e-2) <= 1.0);
        assert!(worst_mismatch(&b.dw, &e.dw, 1e-4, 5e-2) <= 1.0);
        assert!(b.y.iter().all(|v| round_bf16(*v) == *v));
    }
}
