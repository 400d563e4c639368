// pm-probe: the smallest CUPTI PM sampling loop we can write, to tell a
// CUPTI/driver limitation from a bug in streamscope-gpu-sampler. It takes
// each setting as KEY=VALUE and prints one line per decode round, then a
// summary. A diagnosis tool for scripts/gpu/pm-probe.sh; not shipped.
//
//   mode=sample|work   sample (default) or only run the workload
//   secs=3             how long to sample (and run the workload)
//   interval=100000    GPU time interval in ns
//   metrics=a,b        raw metric names (default sm__cycles_active.avg)
//   hw=512             hardware buffer in MiB
//   samples=2000       samples the counter-data image holds
//   decode_ms=50       pause between decode rounds
//   work=1             run the busy kernel in this process meanwhile
//   reset=init|copy    how the image is emptied after a round
//   append=0|1         0 keep oldest, 1 keep latest
//   trigger=time|clk   GPU time interval or SYS clock interval
//   order=image|config create the image before or after SetConfig
//   ctx=0|1            retain the primary context on the sampling thread
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

static std::map<std::string, std::string> opt;
static std::string get(const char *k, const char *d) {
  auto it = opt.find(k);
  return it == opt.end() ? std::string(d) : it->second;
}
static long long geti(const char *k, long long d) {
  auto it = opt.find(k);
  return it == opt.end() ? d : atoll(it->second.c_str());
}
static const char *err(CUptiResult r) {
  const char *s = "?";
  cuptiGetResultString(r, &s);
  return s;
}
#define CK(call)                                                      \
  do {                                                                \
    CUptiResult r_ = (call);                                          \
    if (r_ != CUPTI_SUCCESS) {                                        \
      printf("FAIL %s -> %d %s\n", #call, (int)r_, err(r_));          \
      fflush(stdout);                                                 \
      return 2;                                                       \
    }                                                                 \
  } while (0)

__global__ void busy(float *x, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float a = x[i], b = 1.0001f;
  for (int k = 0; k < iters; ++k) a = a * b + 0.5f;
  x[i] = a;
}

static std::atomic<bool> stop_work(false);
static void workload(double secs) {
  cudaSetDevice(0);
  const int blocks = 132 * 8, threads = 256;
  float *x = nullptr;
  cudaMalloc(&x, sizeof(float) * blocks * threads);
  cudaMemset(x, 0, sizeof(float) * blocks * threads);
  auto t0 = std::chrono::steady_clock::now();
  long n = 0;
  while (!stop_work &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < secs) {
    busy<<<blocks, threads>>>(x, 20000);
    if (++n % 8 == 0) cudaDeviceSynchronize();
    if (n % 64 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // idle gaps
  }
  cudaDeviceSynchronize();
  printf("workload: %ld launches, last error %s\n", n, cudaGetErrorString(cudaGetLastError()));
  cudaFree(x);
}

static void print_maps() {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return;
  char line[1024];
  std::map<std::string, int> seen;
  while (fgets(line, sizeof line, f)) {
    const char *p = strchr(line, '/');
    if (p && (strstr(p, "cupti") || strstr(p, "nvperf") || strstr(p, "libcuda."))) {
      std::string s(p);
      if (!seen[s]++) printf("maps: %s", p);
    }
  }
  fclose(f);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    const char *eq = strchr(argv[i], '=');
    if (eq) opt[std::string(argv[i], (size_t)(eq - argv[i]))] = eq + 1;
  }
  double secs = geti("secs", 3);
  if (get("mode", "sample") == "work") {
    workload(secs);
    return 0;
  }
  if (cuInit(0) != CUDA_SUCCESS) { printf("FAIL cuInit\n"); return 2; }
  CUcontext ctx = nullptr;
  if (geti("ctx", 0)) {
    CUdevice d;
    cuDeviceGet(&d, 0);
    cuDevicePrimaryCtxRetain(&ctx, d);
    cuCtxSetCurrent(ctx);
  }
  std::vector<std::string> names;
  {
    std::string m = get("metrics", "sm__cycles_active.avg"), cur;
    for (char c : m + ",") {
      if (c == ',') { if (!cur.empty()) names.push_back(cur); cur.clear(); } else cur += c;
    }
  }
  std::vector<const char *> cnames;
  for (auto &n : names) cnames.push_back(n.c_str());

  CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
  CK(cuptiProfilerInitialize(&ip));
  CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  cn.deviceIndex = 0;
  CK(cuptiDeviceGetChipName(&cn));
  CUpti_PmSampling_GetCounterAvailability_Params av = {CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE};
  av.deviceIndex = 0;
  CK(cuptiPmSamplingGetCounterAvailability(&av));
  std::vector<uint8_t> avail(av.counterAvailabilityImageSize);
  av.pCounterAvailabilityImage = avail.data();
  CK(cuptiPmSamplingGetCounterAvailability(&av));

  CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  hi.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
  hi.pChipName = cn.pChipName;
  hi.pCounterAvailabilityImage = avail.data();
  CK(cuptiProfilerHostInitialize(&hi));
  CUpti_Profiler_Host_Object *host = hi.pHostObject;
  CUpti_Profiler_Host_ConfigAddMetrics_Params am = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  am.pHostObject = host;
  am.ppMetricNames = cnames.data();
  am.numMetrics = cnames.size();
  CK(cuptiProfilerHostConfigAddMetrics(&am));
  CUpti_Profiler_Host_GetConfigImageSize_Params cs = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
  cs.pHostObject = host;
  CK(cuptiProfilerHostGetConfigImageSize(&cs));
  std::vector<uint8_t> config(cs.configImageSize);
  CUpti_Profiler_Host_GetConfigImage_Params gc = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
  gc.pHostObject = host;
  gc.pConfigImage = config.data();
  gc.configImageSize = config.size();
  CK(cuptiProfilerHostGetConfigImage(&gc));

  CUpti_PmSampling_Enable_Params en = {CUpti_PmSampling_Enable_Params_STRUCT_SIZE};
  en.deviceIndex = 0;
  CK(cuptiPmSamplingEnable(&en));
  CUpti_PmSampling_Object *pm = en.pPmSamplingObject;

  std::vector<uint8_t> image, pristine;
  auto make_image = [&]() -> int {
    CUpti_PmSampling_GetCounterDataSize_Params ds = {CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE};
    ds.pPmSamplingObject = pm;
    ds.pMetricNames = cnames.data();
    ds.numMetrics = cnames.size();
    ds.maxSamples = (uint32_t)geti("samples", 2000);
    CK(cuptiPmSamplingGetCounterDataSize(&ds));
    image.assign(ds.counterDataSize, 0);
    CUpti_PmSampling_CounterDataImage_Initialize_Params ii = {CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    ii.pPmSamplingObject = pm;
    ii.counterDataSize = image.size();
    ii.pCounterData = image.data();
    CK(cuptiPmSamplingCounterDataImageInitialize(&ii));
    pristine = image;
    return 0;
  };
  auto set_config = [&]() -> int {
    CUpti_PmSampling_SetConfig_Params sc = {CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE};
    sc.pPmSamplingObject = pm;
    sc.configSize = config.size();
    sc.pConfig = config.data();
    sc.hardwareBufferSize = (size_t)geti("hw", 512) << 20;
    sc.samplingInterval = (uint64_t)geti("interval", 100000);
    sc.triggerMode = get("trigger", "time") == "clk" ? CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL
                                                     : CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
    sc.hwBufferAppendMode = geti("append", 0) ? CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST
                                              : CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
    CK(cuptiPmSamplingSetConfig(&sc));
    return 0;
  };
  if (get("order", "image") == "image") {
    if (make_image() || set_config()) return 2;
  } else {
    if (set_config() || make_image()) return 2;
  }
  printf("chip %s, %zu metrics, image %zu B, config %zu B\n", cn.pChipName, names.size(), image.size(),
         config.size());

  std::thread work;
  if (geti("work", 1)) work = std::thread(workload, secs);
  CUpti_PmSampling_Start_Params st = {CUpti_PmSampling_Start_Params_STRUCT_SIZE};
  st.pPmSamplingObject = pm;
  CK(cuptiPmSamplingStart(&st));
  auto t0 = std::chrono::steady_clock::now();
  auto ms = [&]() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  long ok = 0, bad = 0, total = 0, nonzero = 0;
  double sum0 = 0;
  uint64_t first_ts = 0, last_ts = 0;
  std::vector<double> vals(names.size());
  bool stopped = false;
  int rounds = 0;
  while (true) {
    bool last = stopped;
    if (!stopped && ms() > secs * 1000 + 300) {
      CUpti_PmSampling_Stop_Params sp = {CUpti_PmSampling_Stop_Params_STRUCT_SIZE};
      sp.pPmSamplingObject = pm;
      CUptiResult r = cuptiPmSamplingStop(&sp);
      printf("%8.1f ms stop -> %d %s\n", ms(), (int)r, err(r));
      stopped = true;
    }
    CUpti_PmSampling_DecodeData_Params dd = {CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE};
    dd.pPmSamplingObject = pm;
    dd.pCounterDataImage = image.data();
    dd.counterDataImageSize = image.size();
    CUptiResult r = cuptiPmSamplingDecodeData(&dd);
    CUpti_PmSampling_GetCounterDataInfo_Params gi = {CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE};
    gi.pCounterDataImage = image.data();
    gi.counterDataImageSize = image.size();
    CUptiResult r2 = cuptiPmSamplingGetCounterDataInfo(&gi);
    ++rounds;
    if (r != CUPTI_SUCCESS) ++bad; else ++ok;
    double v_first = -1, v_last = -1;
    uint64_t s_first = 0, e_last = 0;
    for (size_t i = 0; r == CUPTI_SUCCESS && r2 == CUPTI_SUCCESS && i < gi.numCompletedSamples; ++i) {
      CUpti_PmSampling_CounterData_GetSampleInfo_Params si = {CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE};
      si.pPmSamplingObject = pm;
      si.pCounterDataImage = image.data();
      si.counterDataImageSize = image.size();
      si.sampleIndex = i;
      if (cuptiPmSamplingCounterDataGetSampleInfo(&si) != CUPTI_SUCCESS) continue;
      CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
      ev.pHostObject = host;
      ev.pCounterDataImage = image.data();
      ev.counterDataImageSize = image.size();
      ev.rangeIndex = i;
      ev.ppMetricNames = cnames.data();
      ev.numMetrics = cnames.size();
      ev.pMetricValues = vals.data();
      if (cuptiProfilerHostEvaluateToGpuValues(&ev) != CUPTI_SUCCESS) continue;
      if (!first_ts) first_ts = si.startTimestamp;
      last_ts = si.endTimestamp;
      if (i == 0) { v_first = vals[0]; s_first = si.startTimestamp; }
      v_last = vals[0];
      e_last = si.endTimestamp;
      ++total;
      sum0 += vals[0];
      if (vals[0] > 0) ++nonzero;
    }
    if (rounds <= 12 || r != CUPTI_SUCCESS || rounds % 10 == 0 || last)
      printf("%8.1f ms decode -> %d %s reason=%d overflow=%d | info %d total=%zu populated=%zu completed=%zu | "
             "first %.3f @%llu last %.3f @%llu\n",
             ms(), (int)r, err(r), (int)dd.decodeStopReason, (int)dd.overflow, (int)r2, gi.numTotalSamples,
             gi.numPopulatedSamples, gi.numCompletedSamples, v_first, (unsigned long long)s_first, v_last,
             (unsigned long long)e_last);
    fflush(stdout);
    if (get("reset", "init") == "copy") {
      image = pristine;
    } else {
      CUpti_PmSampling_CounterDataImage_Initialize_Params ii = {CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
      ii.pPmSamplingObject = pm;
      ii.counterDataSize = image.size();
      ii.pCounterData = image.data();
      CUptiResult r3 = cuptiPmSamplingCounterDataImageInitialize(&ii);
      if (r3 != CUPTI_SUCCESS) printf("reset -> %d %s\n", (int)r3, err(r3));
    }
    if (last || bad > 20) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(geti("decode_ms", 50)));
  }
  stop_work = true;
  if (work.joinable()) work.join();
  printf("SUMMARY decodes ok=%ld failed=%ld samples=%ld nonzero=%ld mean0=%.3f span_ms=%.1f\n", ok, bad, total,
         nonzero, total ? sum0 / total : 0.0, (last_ts - first_ts) / 1e6);
  print_maps();
  CUpti_PmSampling_Disable_Params di = {CUpti_PmSampling_Disable_Params_STRUCT_SIZE};
  di.pPmSamplingObject = pm;
  cuptiPmSamplingDisable(&di);
  return bad ? 1 : 0;
}
