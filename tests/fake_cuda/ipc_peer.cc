// ipc_peer.cc: the other process of the fake driver's IPC test. Opens the handle given in hex,
// checks that the bytes read `expect` (one byte value repeated), writes `reply` over them, and
// closes the handle. Exit 0 when all of that worked; a message on stderr otherwise.
#include <cuda.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static int fail(const char* what, CUresult r) {
  fprintf(stderr, "ipc_peer: %s failed: %d\n", what, r);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 5 || strlen(argv[1]) != 2 * sizeof(CUipcMemHandle)) {
    fprintf(stderr, "usage: %s <handle hex> <bytes> <expect byte> <reply byte>\n", argv[0]);
    return 2;
  }
  CUipcMemHandle handle;
  for (size_t i = 0; i < sizeof handle; i++) {
    unsigned v = 0;
    sscanf(argv[1] + 2 * i, "%2x", &v);
    handle.reserved[i] = static_cast<char>(v);
  }
  const size_t bytes = strtoull(argv[2], nullptr, 10);
  const int expect = atoi(argv[3]), reply = atoi(argv[4]);
  CUdevice dev;
  CUcontext ctx;
  CUresult r;
  if ((r = cuInit(0)) || (r = cuDeviceGet(&dev, 0)) || (r = cuDevicePrimaryCtxRetain(&ctx, dev)) ||
      (r = cuCtxSetCurrent(ctx)))
    return fail("init", r);
  CUdeviceptr p = 0;
  if ((r = cuIpcOpenMemHandle(&p, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))) return fail("cuIpcOpenMemHandle", r);
  std::vector<unsigned char> seen(bytes);
  if ((r = cuMemcpyDtoH(seen.data(), p, bytes))) return fail("cuMemcpyDtoH", r);
  for (size_t i = 0; i < bytes; i++) {
    if (seen[i] != expect) {
      fprintf(stderr, "ipc_peer: byte %zu is %d, expected %d\n", i, seen[i], expect);
      return 1;
    }
  }
  if ((r = cuMemsetD8(p, static_cast<unsigned char>(reply), bytes))) return fail("cuMemsetD8", r);
  if ((r = cuIpcCloseMemHandle(p))) return fail("cuIpcCloseMemHandle", r);
  return 0;
}
