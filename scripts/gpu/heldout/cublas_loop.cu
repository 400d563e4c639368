// A native program with cuBLAS: each iteration copies a pageable host
// buffer in, runs a chain of SGEMMs (TF32 off: plain fp32), copies a slice
// back into pageable memory (a synchronous cudaMemcpy) and checks it on
// the host. Times itself with CUDA events; one JSON line.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { auto ck_status_ = (x); if (ck_status_ != 0) { std::fprintf(stderr, "%s:%d error %d\n", __FILE__, __LINE__, (int)ck_status_); std::exit(1); } } while (0)

int main(int argc, char** argv) {
  int steps = argc > 1 ? std::atoi(argv[1]) : 60;
  const int n = 2048;
  std::vector<float> host(n * n, 0.5f), back(n);
  float *a, *b, *c;
  CK(cudaMalloc(&a, sizeof(float) * n * n));
  CK(cudaMalloc(&b, sizeof(float) * n * n));
  CK(cudaMalloc(&c, sizeof(float) * n * n));
  cublasHandle_t h;
  CK(cublasCreate(&h));
  const float one = 1.0f, zero = 0.0f;
  std::vector<cudaEvent_t> ev(steps + 1);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  for (int i = 0; i < steps; ++i) {
    CK(cudaEventRecord(ev[i]));
    CK(cudaMemcpy(a, host.data(), sizeof(float) * n * n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, a, sizeof(float) * n * n, cudaMemcpyDeviceToDevice));
    for (int k = 0; k < 8; ++k)
      CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, k % 2 ? c : a, n, b, n, &zero, k % 2 ? a : c, n));
    CK(cudaMemcpy(back.data(), c, sizeof(float) * n, cudaMemcpyDeviceToHost));
    if (back[0] != back[0]) return 2;
  }
  CK(cudaEventRecord(ev[steps]));
  CK(cudaEventSynchronize(ev[steps]));
  std::vector<float> ms;
  for (int i = 5; i < steps; ++i) { float x; CK(cudaEventElapsedTime(&x, ev[i], ev[i + 1])); ms.push_back(x); }
  std::sort(ms.begin(), ms.end());
  double mean = 0; for (float x : ms) mean += x; mean /= ms.size();
  std::printf("{\"workload\": \"cublas_loop\", \"steps\": %zu, \"median_step_ms\": %.4f, \"mean_step_ms\": %.4f}\n",
              ms.size(), ms[ms.size() / 2], mean);
  cublasDestroy(h);
  return 0;
}
