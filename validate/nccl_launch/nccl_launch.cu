// Host cost of one NCCL collective issued from a C loop (as nccl-tests issues them), and the
// steady-state time per call, on one GPU (one rank). Prints one JSON object.
// Build and run: validate/nccl_launch/run.sh OUTFILE
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "cuda: %s (%s:%d)\n", cudaGetErrorString(e), __FILE__, __LINE__); return 1; } } while (0)
#define NK(x) do { ncclResult_t r = (x); if (r != ncclSuccess) { \
  fprintf(stderr, "nccl: %s (%s:%d)\n", ncclGetErrorString(r), __FILE__, __LINE__); return 1; } } while (0)

static double now_us() {
  return std::chrono::duration<double, std::micro>(
      std::chrono::steady_clock::now().time_since_epoch()).count();
}

static ncclResult_t issue(int kind, void* in, void* out, size_t bytes, ncclComm_t comm,
                          cudaStream_t s) {
  size_t count = bytes / 4;
  if (kind == 0) return ncclAllReduce(in, out, count, ncclFloat, ncclSum, comm, s);
  if (kind == 1) return ncclAllGather(in, out, count, ncclFloat, comm, s);
  return ncclReduceScatter(in, out, count, ncclFloat, ncclSum, comm, s);
}

int main() {
  const char* names[] = {"all_reduce", "all_gather", "reduce_scatter"};
  const size_t sizes[] = {8, 1024, 65536, 1 << 20};
  const int iters = 400, warmup = 50, repeats = 5;
  int dev = 0, version = 0;
  ncclComm_t comm;
  NK(ncclGetVersion(&version));
  NK(ncclCommInitAll(&comm, 1, &dev));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *in, *out;
  CK(cudaMalloc(&in, 1 << 22));
  CK(cudaMalloc(&out, 1 << 22));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  printf("{\"device\": \"%s\", \"nccl_version\": %d, \"iters\": %d, \"repeats\": %d, \"rows\": [",
         prop.name, version, iters, repeats);
  bool first = true;
  for (int kind = 0; kind < 3; ++kind) {
    for (size_t bytes : sizes) {
      for (int i = 0; i < warmup; ++i) NK(issue(kind, in, out, bytes, comm, s));
      CK(cudaStreamSynchronize(s));
      std::vector<double> host, per_call;
      for (int r = 0; r < repeats; ++r) {
        CK(cudaStreamSynchronize(s));
        CK(cudaEventRecord(e0, s));
        double t0 = now_us();
        for (int i = 0; i < iters; ++i) NK(issue(kind, in, out, bytes, comm, s));
        double t1 = now_us();
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        host.push_back((t1 - t0) / iters);
        per_call.push_back(ms * 1000.0 / iters);
      }
      std::sort(host.begin(), host.end());
      std::sort(per_call.begin(), per_call.end());
      printf("%s{\"collective\": \"%s\", \"bytes\": %zu, \"host_us\": [", first ? "" : ", ",
             names[kind], bytes);
      for (int r = 0; r < repeats; ++r) printf("%s%.3f", r ? ", " : "", host[r]);
      printf("], \"per_call_us\": [");
      for (int r = 0; r < repeats; ++r) printf("%s%.3f", r ? ", " : "", per_call[r]);
      printf("]}");
      first = false;
    }
  }
  printf("]}\n");
  ncclCommDestroy(comm);
  return 0;
}
