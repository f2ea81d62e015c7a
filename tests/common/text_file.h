// text_file.h: reading a log or report file a test wrote, and counting what it says.
#pragma once
#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>

namespace accl_test {

// The whole file as text ("" when it cannot be read).
inline std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// How many times `what` occurs in `text` (overlapping occurrences counted).
inline int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
  return n;
}

}  // namespace accl_test
