//! GPU tests of fsdp-ref (ignored by default: they need CUDA, cuBLAS, NVRTC,
//! NCCL and at least one GPU). Run on the GPU machine with
//! `kernels-gpu-tests --ignored --test-threads=1` (scripts/gpu/fsdp-ref.sh).
// libc and CUDA calls of the test itself, each with a SAFETY comment.
#![allow(unsafe_code)]

use std::sync::Arc;

use clap::Parser;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};

use streamscope_kernels::bf16::{bf16_bits_to_f32, f32_to_bf16_bits, round_bf16};
use streamscope_kernels::config::{plan, Args, Plan};
use streamscope_kernels::cpu_ref::{
    block_forward_backward, init_block_params, init_rows, init_scales, worst_mismatch, Rounding,
    INPUT_STREAM, PARAM_STREAM, TARGET_STREAM,
};
use streamscope_kernels::gpu::block::{self, BackwardBufs, Compute, Dims, ForwardBufs};
use streamscope_kernels::gpu::gemm::Gemm;
use streamscope_kernels::gpu::kernels::{compile_ptx, Kernels, KERNEL_NAMES, LOSS_BLOCKS};
use streamscope_kernels::gpu::launch::{device_count, run_local};

fn ptr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    let (p, _g) = s.device_ptr(stream);
    p
}

fn to_bits(v: &[f32]) -> Vec<u16> {
    v.iter().map(|x| f32_to_bf16_bits(*x)).collect()
}

fn from_bits(v: &[u16]) -> Vec<f32> {
    v.iter().map(|b| bf16_bits_to_f32(*b)).collect()
}

fn max_abs(v: &[f32]) -> f32 {
    v.iter().fold(0.0f32, |m, x| m.max(x.abs()))
}

/// Largest mismatch with an absolute floor at 1% of the reference's largest value.
fn mismatch(got: &[f32], want: &[f32], rtol: f32) -> f32 {
    worst_mismatch(got, want, 1e-2 * max_abs(want).max(1e-12), rtol)
}

#[test]
#[ignore = "needs libnvrtc (no GPU)"]
fn kernels_compile_for_hopper_with_nvrtc() {
    // SAFETY: only probes whether libnvrtc can be opened.
    let present = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    assert!(present, "libnvrtc not on LD_LIBRARY_PATH");
    let ptx = compile_ptx(90).expect("cuda/fsdp_kernels.cu compiles");
    let text = ptx.to_src();
    for name in KERNEL_NAMES {
        assert!(
            text.contains(&format!(".entry {name}(")),
            "PTX lacks kernel {name}"
        );
    }
}

#[test]
#[ignore = "needs a GPU"]
fn one_block_matches_the_cpu_reference() {
    let (tokens, dim, seed) = (48usize, 64usize, 11u64);
    let h = 4 * dim;
    assert!(device_count().expect("a GPU and the CUDA libraries") >= 1);
    let ctx = CudaContext::new(0).expect("context on GPU 0");
    // SAFETY: one stream, synchronised before every host read.
    unsafe { ctx.disable_event_tracking() };
    let s: Arc<CudaStream> = ctx.new_stream().expect("stream");
    let kernels = Kernels::load(&ctx).expect("NVRTC compiles the kernels");
    let gemm = Gemm::new(s.clone()).expect("cuBLAS handle");

    // The GPU's seeded initialisation is bit-identical to the CPU's.
    let master = s.alloc_zeros::<f32>(8 * dim * dim).expect("alloc");
    // SAFETY: buffers allocated above with the sizes this call uses.
    unsafe {
        kernels.init_uniform_f32(
            &s,
            ptr(&master, &s),
            8 * dim * dim,
            seed,
            PARAM_STREAM,
            0,
            4 * dim * dim,
            init_scales(dim),
        )
    }
    .expect("init params");
    let w_f32 = s.clone_dtoh(&master).expect("copy back");
    assert_eq!(
        w_f32,
        init_block_params(seed, 0, dim),
        "seeded parameters differ"
    );
    let x_gpu = s.alloc_zeros::<u16>(tokens * dim).expect("alloc");
    // SAFETY: buffers allocated above with the sizes this call uses.
    unsafe {
        kernels.init_uniform_bf16(
            &s,
            ptr(&x_gpu, &s),
            tokens * dim,
            seed,
            INPUT_STREAM,
            0,
            1.0,
        )
    }
    .expect("init x");
    let x = init_rows(seed, INPUT_STREAM, 0, tokens, dim);
    assert_eq!(
        from_bits(&s.clone_dtoh(&x_gpu).expect("copy")),
        x,
        "seeded inputs differ"
    );

    let w: Vec<f32> = w_f32.iter().map(|v| round_bf16(*v)).collect();
    let t = init_rows(seed, TARGET_STREAM, 0, tokens, dim);
    let w_gpu = s.clone_htod(&to_bits(&w)).expect("upload w");
    let t_gpu = s.clone_htod(&to_bits(&t)).expect("upload t");
    let a = s.alloc_zeros::<u16>(tokens * h).expect("alloc");
    let g = s.alloc_zeros::<u16>(tokens * h).expect("alloc");
    let y = s.alloc_zeros::<u16>(tokens * dim).expect("alloc");
    let dy = s.alloc_zeros::<u16>(tokens * dim).expect("alloc");
    let scratch = s.alloc_zeros::<u16>(tokens * h).expect("alloc");
    let dw = s.alloc_zeros::<f32>(8 * dim * dim).expect("alloc");
    let partial = s.alloc_zeros::<f32>(LOSS_BLOCKS as usize).expect("alloc");
    let loss = s.alloc_zeros::<f32>(1).expect("alloc");

    let c = Compute {
        stream: &s,
        gemm: &gemm,
        kernels: &kernels,
    };
    let d = Dims { tokens, dim };
    let inv_count = 1.0 / (tokens * dim) as f32;
    let fb = ForwardBufs {
        x: ptr(&x_gpu, &s),
        w: ptr(&w_gpu, &s),
        a: ptr(&a, &s),
        g: ptr(&g, &s),
        y: ptr(&y, &s),
    };
    // SAFETY: buffers allocated above with the sizes this call uses.
    unsafe { block::forward(&c, d, fb, "test block") }.expect("forward");
    // SAFETY: buffers allocated above with the sizes this call uses.
    unsafe {
        kernels.mse_loss(
            &s,
            ptr(&y, &s),
            ptr(&t_gpu, &s),
            ptr(&dy, &s),
            ptr(&partial, &s),
            ptr(&loss, &s),
            tokens * dim,
            inv_count,
        )
    }
    .expect("loss");
    let y_after_fwd = from_bits(&s.clone_dtoh(&y).expect("copy y"));
    let dy_in = from_bits(&s.clone_dtoh(&dy).expect("copy dy"));
    let bb = BackwardBufs {
        x: ptr(&x_gpu, &s),
        w: ptr(&w_gpu, &s),
        a: ptr(&a, &s),
        g: ptr(&g, &s),
        dy: ptr(&dy, &s),
        scratch: ptr(&scratch, &s),
        dw: ptr(&dw, &s),
    };
    // SAFETY: buffers allocated above with the sizes this call uses.
    unsafe { block::backward(&c, d, bb, "test block") }.expect("backward");
    s.synchronize().expect("sync");

    let want = block_forward_backward(&x, &w, &t, tokens, dim, inv_count, Rounding::Bf16);
    let got_a = from_bits(&s.clone_dtoh(&a).expect("copy a"));
    let got_g = from_bits(&s.clone_dtoh(&g).expect("copy g"));
    let got_loss = s.clone_dtoh(&loss).expect("copy loss")[0];
    let got_dw = s.clone_dtoh(&dw).expect("copy dw");
    let got_dx = from_bits(&s.clone_dtoh(&dy).expect("copy dx"));
    assert!(
        mismatch(&got_a, &want.a, 2e-2) <= 1.0,
        "pre-activation a differs"
    );
    assert!(
        mismatch(&got_g, &want.g, 2e-2) <= 1.0,
        "activation g differs"
    );
    assert!(
        mismatch(&y_after_fwd, &want.y, 2e-2) <= 1.0,
        "output y differs"
    );
    assert!(
        (got_loss - want.loss).abs() <= 1e-3 * want.loss.abs(),
        "loss {got_loss} vs {}",
        want.loss
    );
    assert!(mismatch(&dy_in, &want.dy, 2e-2) <= 1.0, "dy differs");
    let (dw1_g, dw2_g) = got_dw.split_at(4 * dim * dim);
    let (dw1_w, dw2_w) = want.dw.split_at(4 * dim * dim);
    assert!(mismatch(dw2_g, dw2_w, 5e-2) <= 1.0, "dW2 differs");
    assert!(mismatch(dw1_g, dw1_w, 5e-2) <= 1.0, "dW1 differs");
    assert!(mismatch(&got_dx, &want.dx, 5e-2) <= 1.0, "dx differs");
    // The comparison is not vacuous: gradients are non-zero.
    assert!(max_abs(&want.dw) > 0.0 && max_abs(&got_dw) > 0.0);
}

fn small_plan(world: usize, extra: &[&str]) -> Plan {
    let mut v = vec![
        "fsdp-ref", "--layers", "3", "--dim", "256", "--batch", "4", "--seq", "64", "--steps", "5",
        "--warmup", "0", "--lr", "1e-4",
    ];
    v.extend_from_slice(extra);
    plan(&Args::try_parse_from(v).expect("parse"), world).expect("valid plan")
}

fn assert_losses_close(a: &[f32], b: &[f32], rtol: f32, what: &str) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            x.is_finite() && y.is_finite(),
            "{what}: step {i} loss not finite"
        );
        assert!(
            (x - y).abs() <= rtol * y.abs(),
            "{what}: step {i}: {x} vs {y}"
        );
    }
}

#[test]
#[ignore = "needs a GPU"]
fn n_gpu_loss_matches_one_gpu() {
    let n = device_count().expect("a GPU and the CUDA libraries");
    let one = run_local(&small_plan(1, &[])).expect("1-GPU run");
    let loss1 = &one[0].loss;
    assert!(
        loss1[loss1.len() - 1] < loss1[0],
        "training does not reduce the loss: {loss1:?}"
    );
    if n < 2 {
        eprintln!("only one GPU: the N-GPU comparison needs two");
        return;
    }
    let many = run_local(&small_plan(n, &[])).expect("N-GPU run");
    assert_eq!(many.len(), n);
    // Every rank reports the same global loss.
    for r in &many[1..] {
        assert_eq!(r.loss, many[0].loss, "rank {} reports another loss", r.rank);
    }
    assert_losses_close(&many[0].loss, loss1, 2e-2, "N GPUs vs 1 GPU");
}

#[test]
#[ignore = "needs a GPU"]
fn schedules_and_planted_syncs_do_not_change_the_numbers() {
    let n = device_count().expect("a GPU and the CUDA libraries").min(2);
    let base = run_local(&small_plan(n, &["--mode", "serial"])).expect("serial run");
    for extra in [
        &["--mode", "overlap", "--prefetch", "1"][..],
        &["--mode", "overlap", "--prefetch", "0"][..],
        &["--mode", "overlap", "--prefetch", "3"][..],
        &["--item-sync", "--sync-every", "1"][..],
    ] {
        let r = run_local(&small_plan(n, extra)).expect("run");
        // Same kernels in the same order on the compute stream: a missing
        // dependency (a race between streams) would show up here.
        assert_losses_close(
            &r[0].loss,
            &base[0].loss,
            1e-4,
            &format!("{extra:?} vs serial"),
        );
        assert_eq!(r[0].step_ms.len(), 5);
        assert!(r[0].step_ms.iter().all(|t| *t > 0.0));
    }
}
