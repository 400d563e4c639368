/* Plays the CUDA driver and NCCL 2.28 for tests without a GPU or NCCL.
 * First the driver's part: loads CUDA_INJECTION64_PATH and calls its
 * InitializeInjection (the session runs on the fake libcupti). Then NCCL's:
 * opens NCCL_PROFILER_PLUGIN the way NCCL does (dlopen RTLD_NOW|RTLD_LOCAL),
 * looks up "ncclProfiler_v5" and calls it as a communicator init and a few
 * launches do: init, then per launch a Group event, a Coll (AllReduce) and
 * a P2p (Send) started back to back and stopped after, finalize, dlclose.
 * Exits 0 after a second (atexit writes the trace); 5-9 on a setup error.
 *
 * The descriptor is declared here from the layout of NCCL's
 * ncclProfilerEventDescr_v5_t (v2.28 profiler_v5.h): 112 bytes, the union
 * at byte 24. */
#include <dlfcn.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct coll_v5 {
  uint64_t seq; const char *func; const void *send; void *recv; size_t count;
  int root; const char *dtype; uint8_t channels, warps; const char *algo, *proto;
  void *parent_group;
};
struct p2p_v5 {
  const char *func; void *buff; const char *dtype; size_t count; int peer;
  uint8_t channels; void *parent_group;
};
struct descr_v5 {
  uint64_t type; void *parent; int rank;
  union { struct coll_v5 coll; struct p2p_v5 p2p; char size[88]; } u;
};
_Static_assert(sizeof(struct descr_v5) == 112, "v5 descriptor size");
_Static_assert(offsetof(struct descr_v5, u) == 24, "v5 union offset");

struct profiler_v5 {
  const char *name;
  int (*init)(void **ctx, uint64_t comm, int *mask, const char *comm_name,
              int nnodes, int nranks, int rank, void *logfn);
  int (*start)(void *ctx, void **handle, struct descr_v5 *d);
  int (*stop)(void *handle);
  int (*record)(void *handle, int state, void *args);
  int (*finalize)(void *ctx);
};

int main(void) {
  const char *inj = getenv("CUDA_INJECTION64_PATH");
  const char *plug = getenv("NCCL_PROFILER_PLUGIN");
  if (!inj || !plug) return 5;
  void *h = dlopen(inj, RTLD_NOW);
  if (!h) { fprintf(stderr, "%s\n", dlerror()); return 6; }
  int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
  if (!init || init() != 1) return 7;

  void *lib = dlopen(plug, RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 8; }
  struct profiler_v5 *p = (struct profiler_v5 *)dlsym(lib, "ncclProfiler_v5");
  if (!p || !p->name) return 9;
  printf("plugin %s\n", p->name);

  void *ctx = NULL;
  int mask = 0;
  p->init(&ctx, 0xc0ffee0123456789ull, &mask, "world", 1, 2, 1, NULL);
  printf("mask %d\n", mask);
  for (int i = 0; i < 5; i++) {
    struct descr_v5 g = {0}, c = {0}, s = {0};
    void *gh = NULL, *ch = NULL, *sh = NULL;
    g.type = 1; /* ncclProfileGroup */
    p->start(ctx, &gh, &g);
    c.type = 2; /* ncclProfileColl */
    c.parent = NULL; c.rank = 1;
    c.u.coll.seq = (uint64_t)i; c.u.coll.func = "AllReduce"; c.u.coll.count = 1 << 20;
    c.u.coll.dtype = "ncclFloat32"; c.u.coll.channels = 4; c.u.coll.warps = 16;
    c.u.coll.algo = "RING"; c.u.coll.proto = "LL128"; c.u.coll.parent_group = gh;
    p->start(ctx, &ch, &c);
    s.type = 4; /* ncclProfileP2p */
    s.rank = 1;
    s.u.p2p.func = "Send"; s.u.p2p.dtype = "ncclInt8"; s.u.p2p.count = 4096;
    s.u.p2p.peer = 0; s.u.p2p.channels = 1; s.u.p2p.parent_group = gh;
    p->start(ctx, &sh, &s);
    usleep(1000);
    if (ch) p->stop(ch);
    if (sh) p->stop(sh);
    if (gh) p->stop(gh);
    usleep(200000);
  }
  p->finalize(ctx);
  dlclose(lib);
  sleep(1);
  return 0;
}
