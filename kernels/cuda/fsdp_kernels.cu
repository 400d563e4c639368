// Elementwise kernels of fsdp-ref, compiled at run time with NVRTC.
//
// bf16 values travel as raw `unsigned short` bits so that NVRTC needs no
// header (cuda_bf16.h is not always on NVRTC's include path); the
// conversions below round to nearest-even exactly like src/bf16.rs, so the
// CPU reference sees the same numbers. Every loop is grid-stride over a
// 64-bit count, and the loss reduction has a fixed shape so it is
// deterministic run to run.

typedef unsigned short bf16_t;

__device__ __forceinline__ float bf2f(bf16_t x) {
    return __uint_as_float(((unsigned int)x) << 16);
}

__device__ __forceinline__ bf16_t f2bf(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u) {
        return (bf16_t)((u >> 16) | 0x0040u);  // quiet NaN
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16_t)(u >> 16);
}

// splitmix64 finaliser; src/cpu_ref.rs has the same function.
__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Uniform in [-1, 1) from 24 hash bits: exact in f32 on both CPU and GPU.
__device__ __forceinline__ float uniform_pm1(unsigned long long seed, unsigned long long stream,
                                             unsigned long long idx) {
    unsigned long long h = mix64(mix64(seed ^ (stream * 0xd1342543de82ef95ull)) + idx);
    return (float)(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

#define GRID_STRIDE(i, n) \
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; \
         i < (n); i += (unsigned long long)gridDim.x * blockDim.x)

// out[i] = u(seed, stream, offset + i) * (offset + i < split ? scale_lo : scale_hi)
extern "C" __global__ void init_uniform_f32(float* out, unsigned long long n,
                                            unsigned long long seed, unsigned long long stream,
                                            unsigned long long offset, unsigned long long split,
                                            float scale_lo, float scale_hi) {
    GRID_STRIDE(i, n) {
        unsigned long long g = offset + i;
        out[i] = uniform_pm1(seed, stream, g) * (g < split ? scale_lo : scale_hi);
    }
}

extern "C" __global__ void init_uniform_bf16(bf16_t* out, unsigned long long n,
                                             unsigned long long seed, unsigned long long stream,
                                             unsigned long long offset, float scale) {
    GRID_STRIDE(i, n) {
        out[i] = f2bf(uniform_pm1(seed, stream, offset + i) * scale);
    }
}

extern "C" __global__ void cast_f32_bf16(const float* in, bf16_t* out, unsigned long long n) {
    GRID_STRIDE(i, n) { out[i] = f2bf(in[i]); }
}

// tanh-approximated GELU, computed in f32.
__device__ __forceinline__ float gelu_f(float x) {
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    float u = k * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

__device__ __forceinline__ float gelu_grad_f(float x) {
    const float k = 0.7978845608028654f;
    float x2 = x * x;
    float u = k * (x + 0.044715f * x2 * x);
    float t = tanhf(u);
    float du = k * (1.0f + 3.0f * 0.044715f * x2);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

extern "C" __global__ void gelu_fwd(const bf16_t* a, bf16_t* g, unsigned long long n) {
    GRID_STRIDE(i, n) { g[i] = f2bf(gelu_f(bf2f(a[i]))); }
}

extern "C" __global__ void gelu_bwd(const bf16_t* dg, const bf16_t* a, bf16_t* da,
                                    unsigned long long n) {
    GRID_STRIDE(i, n) { da[i] = f2bf(bf2f(dg[i]) * gelu_grad_f(bf2f(a[i]))); }
}

// Mean-squared-error loss: loss = sum 0.5 (y - t)^2 * inv_count, dy = (y - t) * inv_count.
// Launch with exactly LOSS_BLOCKS blocks of 256 threads; each block writes one partial.
extern "C" __global__ void mse_loss_fwd_bwd(const bf16_t* y, const bf16_t* t, bf16_t* dy,
                                            float* partial, unsigned long long n,
                                            float inv_count) {
    __shared__ float acc[256];
    float sum = 0.0f;
    GRID_STRIDE(i, n) {
        float d = bf2f(y[i]) - bf2f(t[i]);
        dy[i] = f2bf(d * inv_count);
        sum += 0.5f * d * d;
    }
    acc[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) acc[threadIdx.x] += acc[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = acc[0] * inv_count;
}

// One block of 256 threads: out[0] = sum of the partials (fixed order).
extern "C" __global__ void sum_partials(const float* partial, unsigned int n, float* out) {
    __shared__ float acc[256];
    float sum = 0.0f;
    for (unsigned int i = threadIdx.x; i < n; i += blockDim.x) sum += partial[i];
    acc[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) acc[threadIdx.x] += acc[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = acc[0];
}

// AdamW on a parameter shard; also writes the bf16 copy that the next all-gather sends.
extern "C" __global__ void adamw_step(float* master, float* m, float* v, const float* grad,
                                      bf16_t* shard_bf16, unsigned long long n, float lr,
                                      float beta1, float beta2, float eps, float weight_decay,
                                      float bias_c1, float bias_c2) {
    GRID_STRIDE(i, n) {
        float g = grad[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / bias_c1;
        float vhat = vi / bias_c2;
        float p = master[i];
        p -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * p);
        master[i] = p;
        shard_bf16[i] = f2bf(p);
    }
}

// SGD with momentum (m = mu m + g; p -= lr m); `v` is unused.
extern "C" __global__ void sgd_momentum_step(float* master, float* m, const float* grad,
                                             bf16_t* shard_bf16, unsigned long long n, float lr,
                                             float momentum) {
    GRID_STRIDE(i, n) {
        float mi = momentum * m[i] + grad[i];
        m[i] = mi;
        float p = master[i] - lr * mi;
        master[i] = p;
        shard_bf16[i] = f2bf(p);
    }
}
