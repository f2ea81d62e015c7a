// proc_sockets.h: which TCP sockets a process listens on, read from /proc (its fd links name
// socket inodes; /proc/net/tcp and tcp6 say which inodes listen where), for tests that connect
// to a library's listeners as a stray or hostile process would.
#pragma once
#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace accl_test {

// The inodes of the sockets `pid` has open.
inline std::set<unsigned long> socketInodes(pid_t pid) {
  std::set<unsigned long> inodes;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return inodes;
  while (dirent* e = readdir(d)) {
    char target[64];
    ssize_t n = readlink((dir + "/" + e->d_name).c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = 0;
    unsigned long ino;
    if (sscanf(target, "socket:[%lu]", &ino) == 1) inodes.insert(ino);
  }
  closedir(d);
  return inodes;
}

// The local addresses, as /proc/net/tcp (or tcp6 with v6) writes them ("0100007F:A1B2"), of
// the sockets among `inodes` that are in LISTEN state.
inline std::vector<std::string> listeningAddresses(const std::set<unsigned long>& inodes, bool v6) {
  std::vector<std::string> out;
  std::ifstream in(v6 ? "/proc/net/tcp6" : "/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // the column names
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string sl, local, remote, st, queues, tr, retr, uid, timeout;
    unsigned long inode = 0;
    ss >> sl >> local >> remote >> st >> queues >> tr >> retr >> uid >> timeout >> inode;
    if (st == "0A" && inodes.count(inode) != 0) out.push_back(local);  // 0A = LISTEN
  }
  return out;
}

}  // namespace accl_test
