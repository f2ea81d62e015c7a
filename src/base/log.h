// log.h: NCCL-compatible logging (NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE).
// WARN lines are always remembered as the "last error" (ncclGetLastError), printed or not.
#pragma once
#include <cstdint>
#include <cstring>
#include <cerrno>
#include <string>

namespace accl {

enum class LogLevel : int { None = 0, Version = 1, Warn = 2, Info = 3, Abort = 4, Trace = 5 };

// Subsystem bits, same values as NCCL's ncclDebugLogSubSys.
enum : uint64_t {
  kSubsysInit = 0x1, kSubsysColl = 0x2, kSubsysP2p = 0x4, kSubsysShm = 0x8, kSubsysNet = 0x10,
  kSubsysGraph = 0x20, kSubsysTuning = 0x40, kSubsysEnv = 0x80, kSubsysAlloc = 0x100,
  kSubsysCall = 0x200, kSubsysProxy = 0x400, kSubsysNvls = 0x800, kSubsysBootstrap = 0x1000,
  kSubsysReg = 0x2000, kSubsysProfile = 0x4000, kSubsysRas = 0x8000, kSubsysAll = ~0ull
};

// Emits one log line if `level`/`subsys` are enabled (WARN: always recorded as last error).
void logMessage(LogLevel level, uint64_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
// A WARN that is not the last error: printed like any WARN, but ncclGetLastError keeps what it
// had. For what another process's junk causes (a stray connection dropped by a listener): the
// calls of this rank succeed, and their last error must not point at it.
void logWarnAside(const char* file, int line, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
// True if a message of this level/subsys would be printed (cheap; for guarding costly formatting).
bool logEnabled(LogLevel level, uint64_t subsys);
// Copy of the most recent WARN text ("" if none). Valid until the next WARN in this process.
const char* lastErrorText();
// The earliest WARN (last-error kind) of the past `withinMs` that was logged on the calling
// thread or begins "rank R:" / "rank R of", R = `rank`, and (naming >= 0) names "rank N",
// N = `naming`: what a communicator failing now on this thread was told first, before the
// consequences it logs itself ("" if none).
std::string firstRecentWarnFor(int rank, int withinMs, int naming = -1);
// The newest WARN of the past `withinMs` logged on the calling thread or beginning "rank R:" /
// "rank R of": why a communicator failing now with no peer to blame fails ("" if none).
std::string latestRecentWarnFor(int rank, int withinMs);
// Forget cached NCCL_DEBUG* settings; re-read at the next log call.
void resetLogInit();
// The device index shown in log lines of this thread ([cudaDev]).
void setLogDevice(int dev);
// Inside a net plugin built from ACCL code (libnccl-net-accl.so) lines go to the host's
// logger instead, so they land in the host's NCCL_DEBUG_FILE and follow its level; null: ours.
using LogSink = void (*)(LogLevel level, uint64_t subsys, const char* file, int line, const char* text);
void setLogSink(LogSink sink);

}  // namespace accl

#define WARN(...) accl::logMessage(accl::LogLevel::Warn, accl::kSubsysAll, __FILE__, __LINE__, __VA_ARGS__)
#define WARN_ASIDE(...) accl::logWarnAside(__FILE__, __LINE__, __VA_ARGS__)
#define INFO(subsys, ...) accl::logMessage(accl::LogLevel::Info, (subsys), __FILE__, __LINE__, __VA_ARGS__)
#define ACCL_TRACE(subsys, ...) accl::logMessage(accl::LogLevel::Trace, (subsys), __FILE__, __LINE__, __VA_ARGS__)
