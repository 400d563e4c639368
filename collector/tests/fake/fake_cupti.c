/* A stand-in libcupti for tests without a GPU: just enough of the API for
 * the collector's session. Every cuptiActivityFlushAll hands back one buffer
 * with a kernel, the runtime call that launched it and a memcpy, in
 * 256-byte slots (cuptiActivityGetNextRecord walks the slots). Record
 * layouts are the CUDA 13.0 prefixes the collector reads. With
 * FAKE_CUPTI_EMPTY set it hands back nothing. Records exist only while the
 * kernel kind is enabled (cuptiActivityEnable(10)), and at the first flush
 * after cuptiActivityDisable(10) (what was buffered); each enable/disable
 * is appended to $FAKE_CUPTI_ACTIVITY_LOG as "enable|disable KIND", each
 * cuptiEnableCallback as "callback ON DOMAIN CBID". */
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdlib.h>
#include <stdio.h>

typedef void (*req_t)(uint8_t **, size_t *, size_t *);
typedef void (*comp_t)(void *, uint32_t, uint8_t *, size_t, size_t);
typedef uint64_t (*ts_t)(void);

static req_t g_req;
static comp_t g_comp;
static ts_t g_ts;
static uint32_t g_corr = 1;

struct kernel { /* CUpti_ActivityKernel10 prefix */
  uint32_t kind; uint8_t cache, smem_cfg; uint16_t regs; uint32_t pgc_req, pgc_exec;
  uint64_t start, end, completed; uint32_t device, context, stream;
  int32_t gx, gy, gz, bx, by, bz, static_smem, dyn_smem;
  uint32_t local_per_thread, local_total, corr; int64_t grid_id; const char *name;
};
struct api { uint32_t kind, cbid; uint64_t start, end; uint32_t pid, tid, corr, ret; };
struct memcpy6 { uint32_t kind; uint8_t copy_kind, src, dst, flags; uint64_t bytes, start, end;
  uint32_t device, context, stream, corr, runtime_corr; };

int cuptiGetVersion(uint32_t *v) { *v = 130000; return 0; }
int cuptiGetResultString(uint32_t r, const char **s) { (void)r; *s = "fake error"; return 0; }
int cuptiActivityRegisterCallbacks(req_t r, comp_t c) { g_req = r; g_comp = c; return 0; }
static int g_kernels_on, g_pending;
static void activity_log(const char *what, uint32_t k) {
  const char *log = getenv("FAKE_CUPTI_ACTIVITY_LOG");
  FILE *f = log ? fopen(log, "a") : 0;
  if (f) { fprintf(f, "%s %u\n", what, k); fclose(f); }
}
int cuptiActivityEnable(uint32_t k) {
  activity_log("enable", k);
  if (k == 10) g_kernels_on = g_pending = 1;
  return 0;
}
int cuptiActivityDisable(uint32_t k) {
  activity_log("disable", k);
  if (k == 10) g_kernels_on = 0;
  return 0;
}
int cuptiActivityRegisterTimestampCallback(ts_t f) { g_ts = f; return 0; }
/* CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER (5, a uint8_t): once set,
 * every buffer requested is checked to be all zero, and "zeroed ADDR" or
 * "dirty ADDR" appended to $FAKE_CUPTI_BUFFER_LOG. */
static int g_zeroed;
int cuptiActivitySetAttribute(uint32_t attr, size_t *size, void *value) {
  if (attr == 5 && size && *size == 1 && value) g_zeroed = *(uint8_t *)value != 0;
  return 0;
}
static void check_zeroed(const uint8_t *b, size_t size) {
  const char *log = getenv("FAKE_CUPTI_BUFFER_LOG");
  if (!g_zeroed || !log) return;
  size_t i = 0;
  while (i < size && b[i] == 0) i++;
  FILE *f = fopen(log, "a");
  if (f) { fprintf(f, "%s %p\n", i == size ? "zeroed" : "dirty", (const void *)b); fclose(f); }
}
int cuptiSubscribe(void **s, void *cb, void *u) { (void)cb; (void)u; *s = (void *)1; return 0; }
int cuptiEnableCallback(uint32_t e, void *s, uint32_t d, uint32_t c) {
  (void)s;
  const char *log = getenv("FAKE_CUPTI_ACTIVITY_LOG");
  FILE *f = log ? fopen(log, "a") : 0;
  if (f) { fprintf(f, "callback %u %u %u\n", e, d, c); fclose(f); }
  return 0;
}
int cuptiSetThreadIdType(uint32_t t) { (void)t; return 0; }
int cuptiGetTimestamp(uint64_t *t) { *t = g_ts ? g_ts() : 1; return 0; }
int cuptiActivityGetNumDroppedRecords(void *c, uint32_t s, size_t *d) { (void)c; (void)s; *d = 0; return 0; }
int cuptiGetCallbackName(uint32_t domain, uint32_t cbid, const char **name) {
  if (domain == 2 && cbid == 211) { *name = "cudaLaunchKernel_v7000"; return 0; }
  if (domain == 2 && cbid == 131) { *name = "cudaStreamSynchronize_v3020"; return 0; }
  if (domain == 2 && cbid == 17) { *name = "cudaGetDevice_v3020"; return 0; }
  if (domain == 1 && cbid == 529) { *name = "cuDevicePrimaryCtxGetState"; return 0; }
  if (domain == 1 && cbid == 307) { *name = "cuLaunchKernel"; return 0; }
  return 1; /* CUPTI_ERROR_INVALID_PARAMETER */
}
/* Per-function record switches: each call appended to $FAKE_CUPTI_API_LOG
 * as "domain cbid enable". */
static int api_switch(uint32_t domain, uint32_t cbid, uint8_t enable) {
  const char *log = getenv("FAKE_CUPTI_API_LOG");
  FILE *f = log ? fopen(log, "a") : 0;
  if (f) { fprintf(f, "%u %u %u\n", domain, cbid, enable); fclose(f); }
  return 0;
}
int cuptiActivityEnableRuntimeApi(uint32_t cbid, uint8_t enable) { return api_switch(2, cbid, enable); }
int cuptiActivityEnableDriverApi(uint32_t cbid, uint8_t enable) { return api_switch(1, cbid, enable); }
int cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, uint8_t **rec) {
  uint8_t *next = *rec ? *rec + 256 : buf;
  if (next + 256 > buf + valid) return 12; /* CUPTI_ERROR_MAX_LIMIT_REACHED */
  *rec = next;
  return 0;
}
int cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;
  if (!g_req || !g_comp) return 1;
  if (getenv("FAKE_CUPTI_EMPTY")) return 0; /* a process that never runs GPU work */
  if (!g_kernels_on && !g_pending) return 0; /* nothing recorded */
  g_pending = g_kernels_on;
  uint8_t *b = 0; size_t size = 0, max = 0;
  g_req(&b, &size, &max);
  if (!b || size < 768) return 1;
  check_zeroed(b, size);
  memset(b, 0, 768);
  uint64_t now = g_ts ? g_ts() : 1000000;
  uint32_t corr = g_corr++;
  struct api a = { 5, 211, now - 5000, now - 4000, 1, 7, corr, 0 };
  struct kernel k;
  memset(&k, 0, sizeof k);
  k.kind = 10; k.regs = 32; k.start = now - 3000; k.end = now - 1000; k.completed = k.end;
  k.device = 0; k.context = 1; k.stream = 7; k.gx = 4; k.gy = 1; k.gz = 1; k.bx = 128; k.by = 1; k.bz = 1;
  k.corr = corr; k.name = (corr % 2) ? "_Z6matmulPfS_" : "ncclDevKernel_AllGather_RING_LL";
  if (getenv("FAKE_ONE_KERNEL")) k.name = "_Z6matmulPfS_"; /* nothing repeats with a period */
  struct memcpy6 m = { 1, 2, 3, 1, 0, 8, now - 900, now - 800, 0, 1, 7, corr + 100000, 0 };
  memcpy(b, &a, sizeof a);
  memcpy(b + 256, &k, sizeof k);
  memcpy(b + 512, &m, sizeof m);
  g_comp(0, 0, b, size, 768);
  return 0;
}

/* PM sampling and the profiler host (CUDA 13.0 layouts): a device that
 * accepts every metric but the NVLink ones (CUPTI_ERROR_INVALID_METRIC_NAME),
 * takes a sample every `samplingInterval` ns stamped on CLOCK_REALTIME (the
 * collector must find that clock), and evaluates every metric to 42, byte
 * counts ("bytes" in the name) to 4200. DecodeData hands out the samples
 * due since the last decode, at most what the image holds (then it says the
 * image is full). The counter-data image holds a count and the samples'
 * start times. Each call is appended to $FAKE_CUPTI_PM_LOG when set. */
#include <time.h>
struct p_chip { size_t ss; void *pp; size_t dev; const char *chip; };
struct p_avail { size_t ss; void *pp; size_t dev; size_t size; uint8_t *img; };
struct p_hinit { size_t ss; void *pp; uint32_t type; const char *chip; const uint8_t *avail; void *host; };
struct p_add { size_t ss; void *pp; void *host; const char **names; size_t n; };
struct p_host { size_t ss; void *pp; void *host; };
struct p_cfgsize { size_t ss; void *pp; void *host; size_t size; };
struct p_cfg { size_t ss; void *pp; void *host; size_t size; uint8_t *img; };
struct p_passes { size_t ss; void *pp; size_t size; uint8_t *img; size_t passes; };
struct p_eval { size_t ss; void *pp; void *host; const uint8_t *img; size_t size; size_t range;
  const char **names; size_t n; double *values; };
struct p_enable { size_t ss; void *pp; size_t dev; void *obj; };
struct p_obj { size_t ss; void *pp; void *obj; };
struct p_setcfg { size_t ss; void *pp; void *obj; size_t cfgsize; const uint8_t *cfg; size_t hw;
  uint64_t interval; uint32_t trigger; uint32_t append; };
struct p_decode { size_t ss; void *pp; void *obj; uint8_t *img; size_t size; uint32_t reason; uint8_t overflow; };
struct p_datasize { size_t ss; void *pp; void *obj; const char **names; size_t n; uint32_t max; size_t size; };
struct p_imginit { size_t ss; void *pp; void *obj; size_t size; uint8_t *img; };
struct p_info { size_t ss; void *pp; const uint8_t *img; size_t size; size_t total, populated, completed; };
struct p_sinfo { size_t ss; void *pp; void *obj; const uint8_t *img; size_t size; size_t index;
  uint64_t start, end; };

static int g_host_obj, g_pm_obj, g_pm_enabled, g_pm_started;
static uint64_t g_interval = 100000, g_next;
static void pm_log(const char *what) {
  const char *p = getenv("FAKE_CUPTI_PM_LOG");
  if (!p) return;
  FILE *f = fopen(p, "a");
  if (f) { fprintf(f, "%s\n", what); fclose(f); }
}
static uint64_t realtime_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
int cuptiProfilerInitialize(void *p) { (void)p; pm_log("profilerInitialize"); return 0; }
int cuptiProfilerDeInitialize(void *p) { (void)p; pm_log("profilerDeInitialize"); return 0; }
int cuptiDeviceGetChipName(struct p_chip *p) { p->chip = "FAKE100"; return 0; }
int cuptiPmSamplingGetCounterAvailability(struct p_avail *p) {
  if (p->img) memset(p->img, 7, p->size); else p->size = 16;
  return 0;
}
int cuptiProfilerHostInitialize(struct p_hinit *p) {
  if (p->type != 1 || !p->chip || !p->avail) return 1;
  p->host = &g_host_obj;
  return 0;
}
int cuptiProfilerHostDeinitialize(struct p_host *p) { return p->host == &g_host_obj ? 0 : 1; }
int cuptiProfilerHostConfigAddMetrics(struct p_add *p) {
  for (size_t i = 0; i < p->n; i++)
    if (strstr(p->names[i], "nvl")) return 17; /* CUPTI_ERROR_INVALID_METRIC_NAME */
  return 0;
}
int cuptiProfilerHostGetConfigImageSize(struct p_cfgsize *p) { p->size = 32; return 0; }
int cuptiProfilerHostGetConfigImage(struct p_cfg *p) { memset(p->img, 1, p->size); return 0; }
int cuptiProfilerHostGetNumOfPasses(struct p_passes *p) { p->passes = 1; return 0; }
int cuptiProfilerHostEvaluateToGpuValues(struct p_eval *p) {
  uint64_t count;
  memcpy(&count, p->img, 8);
  if (p->range >= count) return 1;
  for (size_t i = 0; i < p->n; i++) p->values[i] = strstr(p->names[i], "bytes") ? 4200.0 : 42.0;
  return 0;
}
int cuptiPmSamplingEnable(struct p_enable *p) {
  if (g_pm_enabled) return 7; /* CUPTI_ERROR_INVALID_OPERATION */
  g_pm_enabled = 1; p->obj = &g_pm_obj; pm_log("enable"); return 0;
}
int cuptiPmSamplingDisable(struct p_obj *p) { (void)p; g_pm_enabled = 0; pm_log("disable"); return 0; }
int cuptiPmSamplingSetConfig(struct p_setcfg *p) {
  if (p->trigger != 1 || p->interval == 0 || p->ss < 64) return 1;
  g_interval = p->interval;
  return 0;
}
int cuptiPmSamplingStart(struct p_obj *p) { (void)p; g_pm_started = 1; g_next = realtime_ns(); pm_log("start"); return 0; }
int cuptiPmSamplingStop(struct p_obj *p) { (void)p; g_pm_started = 0; pm_log("stop"); return 0; }
int cuptiPmSamplingGetCounterDataSize(struct p_datasize *p) { p->size = 8 + (size_t)p->max * 8; return 0; }
int cuptiPmSamplingCounterDataImageInitialize(struct p_imginit *p) { memset(p->img, 0, p->size); return 0; }
int cuptiPmSamplingDecodeData(struct p_decode *p) {
  uint64_t count, now = realtime_ns();
  memcpy(&count, p->img, 8);
  uint64_t cap = (p->size - 8) / 8, due = 0;
  if (g_next + g_interval <= now) due = (now - g_next) / g_interval;
  uint64_t take = due < cap - count ? due : cap - count;
  for (uint64_t i = 0; i < take; i++) {
    uint64_t s = g_next + i * g_interval;
    memcpy(p->img + 8 + (count + i) * 8, &s, 8);
  }
  count += take;
  g_next += take * g_interval;
  memcpy(p->img, &count, 8);
  p->reason = due > take ? 1 : 2;
  p->overflow = 0;
  return 0;
}
int cuptiPmSamplingGetCounterDataInfo(struct p_info *p) {
  uint64_t count;
  memcpy(&count, p->img, 8);
  p->total = (p->size - 8) / 8; p->populated = count; p->completed = count;
  return 0;
}
int cuptiPmSamplingCounterDataGetSampleInfo(struct p_sinfo *p) {
  uint64_t count, s;
  memcpy(&count, p->img, 8);
  if (p->index >= count) return 1;
  memcpy(&s, p->img + 8 + p->index * 8, 8);
  p->start = s; p->end = s + g_interval;
  return 0;
}
