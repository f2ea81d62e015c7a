// status_server.h: answers "where are you?" for every communicator of this process, so a rank
// that is stuck can ask all the others and name the ones that are behind or gone (the hang
// summary). One thread per process, blocked in poll() between queries; queries carry the
// communicator's magic and nonce, anything else is dropped.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "net/socket.h"
#include "topo/cpu_mask.h"

namespace accl {

class Comm;
struct RealignNote;

// Starts the process's server on the bootstrap interface (once) and returns its address.
// `cpus`: where its thread runs (the first communicator's helper CPUs).
ncclResult_t statusServerAddress(const topo::CpuMask& cpus, net::SockAddr* out);
void statusRegister(Comm* comm);
void statusUnregister(Comm* comm);

// Sends `note` (comm/realign_mailbox.h) to `peer`'s status server, which puts it in the
// peer's mailbox and wakes the peer. Fails (WARNed) when the peer cannot be reached.
ncclResult_t sendRealignNote(Comm& c, int peer, const RealignNote& note, int budgetMs);

// This rank's one-line status (ops issued/completed, and what it waits for if blocked).
std::string statusLine(Comm& comm);

// Asks every other rank of `comm` for its status, all at once, and returns one line per rank
// within about `budgetMs`. A rank whose status server cannot be reached gets a line with
// "no answer" (gone); one that accepts the connection but does not reply in time (stopped,
// e.g. SIGSTOP or a debugger, or starved) gets "not responding".
std::vector<std::string> gatherStatus(Comm& comm, int budgetMs);

// Asks every rank of `comm` (itself included) for its wait note (Comm::waitNote: the call it
// has been blocked in, "" when it is not blocked), within about `budgetMs`. *allAnswered is
// false when some rank gave no reply (its entry is then "").
std::vector<std::string> gatherWaitNotes(Comm& comm, int budgetMs, bool* allAnswered);

}  // namespace accl
