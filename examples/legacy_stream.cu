// The seed's footgun, as a native program: two streams whose work would
// overlap, and a tiny kernel on the legacy default stream between them.
// With streams made by cudaStreamCreate (blocking), the legacy stream waits
// for all their earlier work and their later work waits for it; with
// --nonblocking (cudaStreamNonBlocking) nothing is ordered and the streams
// overlap. Each step: A1 (long) on stream a, B1 (short) on b, the tiny
// kernel on stream 0, A2 (short) on a, B2 (long) on b, then
// cudaDeviceSynchronize. Prints one JSON line: the mode and the median
// step time, measured on the host from the first launch to the return of
// the synchronize (3 warm-up steps left out).
//
//   nvcc -O2 -arch=sm_90 -o legacy_stream examples/legacy_stream.cu
//   ./legacy_stream [--nonblocking] [--steps N] [--long-us U]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x)                                                              \
  do {                                                                        \
    cudaError_t e_ = (x);                                                     \
    if (e_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                 \
                   cudaGetErrorString(e_));                                   \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

// Spins for about `ns` nanoseconds on one block (the GPU's own clock).
__global__ void spin(long long ns, int* sink) {
  long long start = clock64();
  // clock64 counts SM cycles; about 1.98 GHz on an H200 under load.
  long long cycles = ns * 2;
  while (clock64() - start < cycles) {
  }
  if (threadIdx.x == 0 && sink) atomicAdd(sink, 1);
}

int main(int argc, char** argv) {
  bool nonblocking = false;
  int steps = 50;
  long long long_us = 1000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--nonblocking")) nonblocking = true;
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--long-us") && i + 1 < argc) long_us = std::atoll(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--nonblocking] [--steps N] [--long-us U]\n", argv[0]);
      return 2;
    }
  }
  int* sink = nullptr;
  CHECK(cudaMalloc(&sink, sizeof(int)));
  cudaStream_t a, b;
  unsigned flags = nonblocking ? cudaStreamNonBlocking : cudaStreamDefault;
  CHECK(cudaStreamCreateWithFlags(&a, flags));
  CHECK(cudaStreamCreateWithFlags(&b, flags));
  const long long L = long_us * 1000, S = L / 2, tiny = 10 * 1000;
  std::vector<float> ms;
  for (int s = 0; s < steps + 3; ++s) {
    auto host0 = std::chrono::steady_clock::now();
    spin<<<1, 32, 0, a>>>(L, sink);     // A1
    spin<<<1, 32, 0, b>>>(S, sink);     // B1
    spin<<<1, 32, 0, 0>>>(tiny, sink);  // the tiny kernel, legacy default stream
    spin<<<1, 32, 0, a>>>(S, sink);     // A2
    spin<<<1, 32, 0, b>>>(L, sink);     // B2
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    float step_ms = std::chrono::duration<float, std::milli>(
                        std::chrono::steady_clock::now() - host0)
                        .count();
    if (s >= 3) ms.push_back(step_ms);  // 3 warm-up steps
  }
  std::sort(ms.begin(), ms.end());
  float median = ms.empty() ? 0.f : ms[ms.size() / 2];
  std::printf("{\"mode\": \"%s\", \"steps\": %zu, \"median_step_ms\": %.4f}\n",
              nonblocking ? "nonblocking" : "blocking", ms.size(), median);
  CHECK(cudaFree(sink));
  return 0;
}
