/* Plays the CUDA driver for tests without a GPU: loads the library named by
 * CUDA_INJECTION64_PATH, calls its InitializeInjection, runs for 2 s, exits 4. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
  const char *path = getenv("CUDA_INJECTION64_PATH");
  if (!path) return 5;
  void *h = dlopen(path, RTLD_NOW);
  if (!h) { fprintf(stderr, "%s\n", dlerror()); return 6; }
  int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
  if (!init) return 7;
  if (init() != 1) return 8;
  sleep(2);
  return 4;
}
