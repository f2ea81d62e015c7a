/* tcp_net_plugin.c: a small TCP net plugin for NCCL-compatible hosts, written for ACCL's
 * tests as a third party would write one: plain C, only <nccl_net.h>, no ACCL internals.
 * Which ABI tables it exports is chosen at build time (TCPNET_V6, TCPNET_V8, TCPNET_V11), so
 * the tests can load each version and check the host adapts it.
 *
 * One TCP socket per comm; a message is an 8-byte length then the payload. Requests of a comm
 * complete in order and move bytes only inside test() (non-blocking sockets), as the ncclNet
 * contract allows. Device 0 is the address of TCPNET_IFNAME (an interface name prefix), else
 * the first up IPv4 interface that is not loopback, else 127.0.0.1.
 * Test hooks: TCPNET_FAIL_INIT=1 makes init fail, TCPNET_NO_DEVICE=1 reports no device. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nccl_net.h"

#define TCPNET_MAGIC 0x54435031u /* "TCP1" */
#define TCPNET_REQS NCCL_NET_MAX_REQUESTS

static ncclDebugLogger_t logger;
#define LOG(level, ...) \
  do {                  \
    if (logger) logger(level, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

struct handle {
  uint32_t magic;
  struct sockaddr_in addr;
};

struct comm;
struct request {
  struct comm* comm;
  int used, complete, failed;
  char* data;
  size_t size;     /* posted (receive) or to send */
  uint64_t header; /* message length */
  size_t hdrDone, dataDone;
};

struct comm {
  int fd;
  int isSend;
  int broken;
  struct request reqs[TCPNET_REQS];
  unsigned head, tail; /* FIFO of request slots, in post order */
};

struct listen_comm {
  int fd;
};

static struct sockaddr_in devAddr;
static char devName[IF_NAMESIZE + 1] = "lo";

/* TCPNET_PCI_PATHS="path0;path1;...": that many devices (at most 4), all on the same TCP
   address, each reporting its path as pciPath, so a host's choice among NICs can be tested. */
#define TCPNET_MAX_DEVS 4
static int ndevs = 1;
static char pciPaths[TCPNET_MAX_DEVS][256];

static void readPciPaths(void) {
  const char* list = getenv("TCPNET_PCI_PATHS");
  ndevs = 1;
  pciPaths[0][0] = '\0';
  if (!list || !*list) return;
  ndevs = 0;
  while (*list && ndevs < TCPNET_MAX_DEVS) {
    size_t len = strcspn(list, ";");
    snprintf(pciPaths[ndevs++], sizeof(pciPaths[0]), "%.*s", (int)len, list);
    list += len;
    if (*list == ';') list++;
  }
}

static int validDev(int dev) { return dev >= 0 && dev < ndevs; }

static int envIs(const char* name) {
  const char* v = getenv(name);
  return v && strcmp(v, "1") == 0;
}

static void pickDevice(void) {
  const char* want = getenv("TCPNET_IFNAME");
  struct ifaddrs *list, *it;
  memset(&devAddr, 0, sizeof(devAddr));
  devAddr.sin_family = AF_INET;
  devAddr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (getifaddrs(&list) != 0) return;
  for (it = list; it; it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET || !(it->ifa_flags & IFF_UP)) continue;
    if (want ? strncmp(it->ifa_name, want, strlen(want)) != 0 : (it->ifa_flags & IFF_LOOPBACK) != 0) continue;
    memcpy(&devAddr, it->ifa_addr, sizeof(devAddr));
    strncpy(devName, it->ifa_name, IF_NAMESIZE);
    break;
  }
  freeifaddrs(list);
}

static ncclResult_t tcpInit(ncclDebugLogger_t log) {
  logger = log;
  if (envIs("TCPNET_FAIL_INIT")) {
    LOG(NCCL_LOG_WARN, "TestTCP: init fails on purpose (TCPNET_FAIL_INIT=1)");
    return ncclSystemError;
  }
  pickDevice();
  readPciPaths();
  LOG(NCCL_LOG_INFO, "TestTCP: device 0 is %s (%s)", devName, inet_ntoa(devAddr.sin_addr));
  return ncclSuccess;
}

static ncclResult_t tcpDevices(int* ndev) {
  *ndev = envIs("TCPNET_NO_DEVICE") ? 0 : ndevs;
  return ncclSuccess;
}

static void fillCommonProps(int dev, char** name, char** pciPath, uint64_t* guid, int* ptrSupport, int* speed, int* port,
                            float* latency, int* maxComms, int* maxRecvs) {
  *name = devName;
  *pciPath = pciPaths[dev][0] ? pciPaths[dev] : NULL;
  *guid = 0x7c9;
  *ptrSupport = NCCL_PTR_HOST;
  *speed = 10000;
  *port = 0;
  *latency = 0;
  *maxComms = 65536;
  *maxRecvs = 1;
}

static int setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static ncclResult_t tcpListen(int dev, void* opaque, void** listenComm) {
  struct handle* h = (struct handle*)opaque;
  struct sockaddr_in addr = devAddr;
  socklen_t len = sizeof(addr);
  struct listen_comm* lc;
  int fd;
  if (!validDev(dev)) return ncclInvalidArgument;
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ncclSystemError;
  addr.sin_port = 0;
  if (bind(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, (struct sockaddr*)&addr, &len) != 0 || setNonBlocking(fd) != 0) {
    LOG(NCCL_LOG_WARN, "TestTCP: cannot listen on %s: %s", inet_ntoa(devAddr.sin_addr), strerror(errno));
    close(fd);
    return ncclSystemError;
  }
  lc = (struct listen_comm*)calloc(1, sizeof(*lc));
  if (!lc) {
    close(fd);
    return ncclSystemError;
  }
  lc->fd = fd;
  memset(h, 0, NCCL_NET_HANDLE_MAXSIZE);
  h->magic = TCPNET_MAGIC;
  h->addr = addr;
  *listenComm = lc;
  return ncclSuccess;
}

static struct comm* newComm(int fd, int isSend) {
  struct comm* c = (struct comm*)calloc(1, sizeof(*c));
  int one = 1;
  if (!c) return NULL;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setNonBlocking(fd);
  c->fd = fd;
  c->isSend = isSend;
  return c;
}

/* The listener already exists when the handle is passed on, so connect() completes in the
 * peer's kernel backlog without waiting for its accept. */
static ncclResult_t tcpConnect(int dev, void* opaque, void** sendComm) {
  struct handle* h = (struct handle*)opaque;
  int fd;
  *sendComm = NULL;
  if (!validDev(dev) || h->magic != TCPNET_MAGIC) return ncclInvalidArgument;
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ncclSystemError;
  if (connect(fd, (struct sockaddr*)&h->addr, sizeof(h->addr)) != 0) {
    LOG(NCCL_LOG_WARN, "TestTCP: connect to %s:%d failed: %s", inet_ntoa(h->addr.sin_addr), ntohs(h->addr.sin_port),
        strerror(errno));
    close(fd);
    return ncclRemoteError;
  }
  *sendComm = newComm(fd, 1);
  return *sendComm ? ncclSuccess : ncclSystemError;
}

static ncclResult_t tcpAccept(void* listenComm, void** recvComm) {
  struct listen_comm* lc = (struct listen_comm*)listenComm;
  int fd = accept4(lc->fd, NULL, NULL, SOCK_CLOEXEC);
  *recvComm = NULL;
  if (fd < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? ncclSuccess : ncclSystemError;
  *recvComm = newComm(fd, 0);
  return *recvComm ? ncclSuccess : ncclSystemError;
}

static ncclResult_t tcpRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  (void)comm, (void)data, (void)size;
  if (type != NCCL_PTR_HOST) return ncclInternalError;
  *mhandle = (void*)(uintptr_t)0x1; /* nothing to register for TCP */
  return ncclSuccess;
}
static ncclResult_t tcpRegMrInt(void* comm, void* data, int size, int type, void** mhandle) {
  return tcpRegMr(comm, data, (size_t)size, type, mhandle);
}
static ncclResult_t tcpRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                   void** mhandle) {
  (void)comm, (void)data, (void)size, (void)type, (void)offset, (void)fd, (void)mhandle;
  return ncclInternalError;
}
static ncclResult_t tcpDeregMr(void* comm, void* mhandle) {
  (void)comm, (void)mhandle;
  return ncclSuccess;
}

static struct request* post(struct comm* c, void* data, size_t size) {
  struct request* r;
  if (c->tail - c->head == TCPNET_REQS) return NULL; /* full: the caller retries */
  r = &c->reqs[c->tail % TCPNET_REQS];
  memset(r, 0, sizeof(*r));
  r->comm = c;
  r->used = 1;
  r->data = (char*)data;
  r->size = size;
  r->header = size;
  c->tail++;
  return r;
}

/* Moves bytes for the oldest unfinished requests until the socket would block. */
static int moveBytes(struct comm* c, char* buf, size_t want) {
  ssize_t n = c->isSend ? send(c->fd, buf, want, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(c->fd, buf, want, MSG_DONTWAIT);
  if (n > 0) return (int)n;
  if (n == 0 && !c->isSend) {
    errno = 0; /* peer closed */
    return -1;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  return -1;
}

static ncclResult_t progress(struct comm* c) {
  unsigned i;
  if (c->broken) return ncclRemoteError;
  for (i = c->head; i != c->tail; i++) {
    struct request* r = &c->reqs[i % TCPNET_REQS];
    if (r->complete) continue;
    while (r->hdrDone < sizeof(r->header)) {
      int n = moveBytes(c, (char*)&r->header + r->hdrDone, sizeof(r->header) - r->hdrDone);
      if (n < 0) goto broken;
      if (n == 0) return ncclSuccess;
      r->hdrDone += (size_t)n;
    }
    if (!c->isSend && r->header > r->size) {
      LOG(NCCL_LOG_WARN, "TestTCP: %llu-byte message for a %zu-byte receive", (unsigned long long)r->header, r->size);
      c->broken = 1;
      return ncclInternalError;
    }
    while (r->dataDone < r->header) {
      int n = moveBytes(c, r->data + r->dataDone, r->header - r->dataDone);
      if (n < 0) goto broken;
      if (n == 0) return ncclSuccess;
      r->dataDone += (size_t)n;
    }
    r->complete = 1;
  }
  return ncclSuccess;
broken:
  LOG(NCCL_LOG_INFO, "TestTCP: connection lost: %s", errno ? strerror(errno) : "closed by peer");
  c->broken = 1;
  return ncclRemoteError;
}

static ncclResult_t tcpIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  (void)tag, (void)mhandle;
  *request = post((struct comm*)sendComm, data, size);
  return ncclSuccess;
}
static ncclResult_t tcpIsendInt(void* sendComm, void* data, int size, int tag, void* mhandle, void** request) {
  return tcpIsend(sendComm, data, (size_t)size, tag, mhandle, request);
}
static ncclResult_t tcpIsendV10(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                                void** request) {
  (void)phandle;
  return tcpIsend(sendComm, data, size, tag, mhandle, request);
}

static ncclResult_t tcpIrecv(void* recvComm, int n, void** data, size_t size, void** request) {
  if (n != 1) return ncclInternalError; /* maxRecvs is 1 */
  *request = post((struct comm*)recvComm, data[0], size);
  return ncclSuccess;
}
static ncclResult_t tcpIrecvInt(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                                void** request) {
  (void)tags, (void)mhandles;
  return tcpIrecv(recvComm, n, data, (size_t)sizes[0], request);
}
static ncclResult_t tcpIrecvV10(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                                void** phandles, void** request) {
  (void)tags, (void)mhandles, (void)phandles;
  return tcpIrecv(recvComm, n, data, sizes[0], request);
}

static ncclResult_t tcpIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  (void)recvComm, (void)n, (void)data, (void)sizes, (void)mhandles;
  *request = NULL; /* host memory needs no flush */
  return ncclSuccess;
}

static ncclResult_t tcpTest(void* request, int* done, int* sizes) {
  struct request* r = (struct request*)request;
  struct comm* c = r->comm;
  /* A request that completed before the peer closed is done: a finished peer closes at once. */
  ncclResult_t res = progress(c);
  *done = 0;
  if (!r->complete) return res;
  *done = 1;
  if (sizes) *sizes = (int)r->header;
  r->used = 0;
  while (c->head != c->tail && !c->reqs[c->head % TCPNET_REQS].used) c->head++;
  return ncclSuccess;
}

static ncclResult_t closeComm(void* comm) {
  struct comm* c = (struct comm*)comm;
  if (!c) return ncclSuccess;
  close(c->fd);
  free(c);
  return ncclSuccess;
}
static ncclResult_t tcpCloseListen(void* listenComm) {
  struct listen_comm* lc = (struct listen_comm*)listenComm;
  if (!lc) return ncclSuccess;
  close(lc->fd);
  free(lc);
  return ncclSuccess;
}

static ncclResult_t tcpGetDeviceMr(void* comm, void* mhandle, void** dptr) {
  (void)comm, (void)mhandle, (void)dptr;
  return ncclInternalError;
}
static ncclResult_t tcpIrecvConsumed(void* recvComm, int n, void* request) {
  (void)recvComm, (void)n, (void)request;
  return ncclSuccess;
}

#ifdef TCPNET_V6
static ncclResult_t getPropsV6(int dev, ncclNetProperties_v6_t* p) {
  if (!validDev(dev)) return ncclInvalidArgument;
  fillCommonProps(dev, &p->name, &p->pciPath, &p->guid, &p->ptrSupport, &p->speed, &p->port, &p->latency, &p->maxComms,
                  &p->maxRecvs);
  return ncclSuccess;
}
__attribute__((visibility("default"))) const ncclNet_v6_t ncclNetPlugin_v6 = {
    "TestTCP", tcpInit, tcpDevices, getPropsV6, tcpListen, tcpConnect, tcpAccept, tcpRegMrInt, tcpRegMrDmaBuf,
    tcpDeregMr, tcpIsendInt, tcpIrecvInt, tcpIflush, tcpTest, closeComm, closeComm, tcpCloseListen};
#endif

#ifdef TCPNET_V8
static ncclResult_t getPropsV8(int dev, ncclNetProperties_v8_t* p) {
  if (!validDev(dev)) return ncclInvalidArgument;
  memset(p, 0, sizeof(*p));
  fillCommonProps(dev, &p->name, &p->pciPath, &p->guid, &p->ptrSupport, &p->speed, &p->port, &p->latency, &p->maxComms,
                  &p->maxRecvs);
  p->netDeviceType = NCCL_NET_DEVICE_HOST;
  return ncclSuccess;
}
static ncclResult_t connectV8(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t** devComm) {
  (void)devComm;
  return tcpConnect(dev, handle, sendComm);
}
static ncclResult_t acceptV8(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t** devComm) {
  (void)devComm;
  return tcpAccept(listenComm, recvComm);
}
__attribute__((visibility("default"))) const ncclNet_v8_t ncclNetPlugin_v8 = {
    "TestTCP", tcpInit, tcpDevices, getPropsV8, tcpListen, connectV8, acceptV8, tcpRegMr, tcpRegMrDmaBuf, tcpDeregMr,
    tcpIsendInt, tcpIrecvInt, tcpIflush, tcpTest, closeComm, closeComm, tcpCloseListen, tcpGetDeviceMr,
    tcpIrecvConsumed};
#endif

#ifdef TCPNET_V11
static int contexts; /* live per-communicator contexts, for the log */
static ncclResult_t initV11(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config, ncclDebugLogger_t log,
                            ncclProfilerCallback_t prof) {
  (void)config, (void)prof;
  if (!logger) {
    ncclResult_t res = tcpInit(log);
    if (res != ncclSuccess) return res;
  } else if (envIs("TCPNET_FAIL_INIT")) {
    return ncclSystemError;
  }
  *ctx = malloc(sizeof(uint64_t));
  if (!*ctx) return ncclSystemError;
  *(uint64_t*)*ctx = commId;
  LOG(NCCL_LOG_INFO, "TestTCP: v11 context for comm %llx (%d live)", (unsigned long long)commId, ++contexts);
  return ncclSuccess;
}
static ncclResult_t finalizeV11(void* ctx) {
  contexts--;
  free(ctx);
  return ncclSuccess;
}
static ncclResult_t getPropsV11(int dev, ncclNetProperties_v11_t* p) {
  if (!validDev(dev)) return ncclInvalidArgument;
  memset(p, 0, sizeof(*p));
  fillCommonProps(dev, &p->name, &p->pciPath, &p->guid, &p->ptrSupport, &p->speed, &p->port, &p->latency, &p->maxComms,
                  &p->maxRecvs);
  p->netDeviceType = NCCL_NET_DEVICE_HOST;
  p->maxP2pBytes = NCCL_MAX_NET_SIZE_BYTES;
  p->maxCollBytes = NCCL_MAX_NET_SIZE_BYTES;
  p->maxMultiRequestSize = 1;
  return ncclSuccess;
}
static ncclResult_t listenV11(void* ctx, int dev, void* handle, void** listenComm) {
  if (!ctx) return ncclInvalidArgument;
  return tcpListen(dev, handle, listenComm);
}
static ncclResult_t connectV11(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v11_t** dc) {
  (void)dc;
  if (!ctx) return ncclInvalidArgument;
  return tcpConnect(dev, handle, sendComm);
}
static ncclResult_t acceptV11(void* listenComm, void** recvComm, ncclNetDeviceHandle_v11_t** dc) {
  (void)dc;
  return tcpAccept(listenComm, recvComm);
}
__attribute__((visibility("default"))) const ncclNet_v11_t ncclNetPlugin_v11 = {
    "TestTCP", initV11, tcpDevices, getPropsV11, listenV11, connectV11, acceptV11, tcpRegMr, tcpRegMrDmaBuf,
    tcpDeregMr, tcpIsendV10, tcpIrecvV10, tcpIflush, tcpTest, closeComm, closeComm, tcpCloseListen, tcpGetDeviceMr,
    tcpIrecvConsumed, NULL, finalizeV11, NULL};
#endif
