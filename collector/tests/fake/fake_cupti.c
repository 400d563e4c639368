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
  memset(b, 0, 768);
  uint64_t now = g_ts ? g_ts() : 1000000;
  uint32_t corr = g_corr++;
  struct api a = { 5, 211, now - 5000, now - 4000, 1, 7, corr, 0 };
  struct kernel k;
  memset(&k, 0, sizeof k);
  k.kind = 10; k.regs = 32; k.start = now - 3000; k.end = now - 1000; k.completed = k.end;
  k.device = 0; k.context = 1; k.stream = 7; k.gx = 4; k.gy = 1; k.gz = 1; k.bx = 128; k.by = 1; k.bz = 1;
  k.corr = corr; k.name = (corr % 2) ? "_Z6matmulPfS_" : "ncclDevKernel_AllGather_RING_LL";
  struct memcpy6 m = { 1, 2, 3, 1, 0, 8, now - 900, now - 800, 0, 1, 7, corr + 100000, 0 };
  memcpy(b, &a, sizeof a);
  memcpy(b + 256, &k, sizeof k);
  memcpy(b + 512, &m, sizeof m);
  g_comp(0, 0, b, size, 768);
  return 0;
}
