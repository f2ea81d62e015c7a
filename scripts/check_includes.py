#!/usr/bin/env python3
"""check_includes.py: every C++ file includes the standard headers for what it uses.

A file that uses uint64_t, std::string or memcpy must get <cstdint>, <string> or <cstring> from
its own #include lines, or from a header of this project that it includes (directly or through
other project headers): never through a standard header that happens to include another one
today. That is the fault GCC 13 exposed (its libstdc++ stopped including <cstdint> from
<string> and others), and clang with libc++ or GCC 12 never show it. Debian 12 has no GCC 13, so
this check is what catches it here: it knows which standard header declares each common name
(the table below) and reads include lines, so it needs no compiler at all.

  usage: scripts/check_includes.py [--fix] [repo-root]
  Exit 0 when every file is complete, 1 with one line per missing header (file: <header> for
  name at line N). --fix adds the missing includes after the file's last standard include.

Folders checked: src, transports, kernels, tools, perf, tests, plugins, python/torch_accl/csrc.
"""
import os
import re
import sys

FOLDERS = ["src", "transports", "kernels", "tools", "perf", "tests", "plugins", "python/torch_accl/csrc"]
SUFFIXES = (".cc", ".h", ".cpp", ".hpp", ".c")
# Where a quoted include is looked up (besides the including file's own folder).
INCLUDE_ROOTS = ["include", "src", "kernels", "tests", ".", "perf", "perf/harness", "transports"]

# Headers that declare size_t (C: stddef, stdlib, string, stdio, time, wchar; POSIX: sys/types and
# the headers that include it by specification).
SIZE_T = {"cstddef", "stddef.h", "cstdlib", "stdlib.h", "cstring", "string.h", "cstdio", "stdio.h", "ctime",
          "time.h", "cwchar", "wchar.h", "sys/types.h", "unistd.h", "sys/socket.h", "sys/uio.h", "sys/mman.h",
          "sys/stat.h", "pthread.h", "signal.h", "fcntl.h", "sys/un.h", "netinet/in.h", "sys/ioctl.h"}
CSTDINT = {"cstdint", "stdint.h", "cinttypes", "inttypes.h"}
CSTRING = {"cstring", "string.h"}
CSTDIO = {"cstdio", "stdio.h"}
CSTDLIB = {"cstdlib", "stdlib.h"}

# (regex over code without comments and string literals, headers any of which provides it, the
# header --fix adds). Names are chosen so that a match is a use: std:: qualified, or a C name
# followed by "(".
RULES = [
    (r"\b(?:std::)?u?int(?:8|16|32|64)_t\b|\b(?:std::)?u?intptr_t\b|\bU?INT(?:8|16|32|64)_(?:MAX|MIN|C)\b"
     r"|\bUINTPTR_MAX\b|\bSIZE_MAX\b", CSTDINT, "cstdint"),
    (r"\bstd::size_t\b|(?<![\w:])size_t\b", SIZE_T, "cstddef"),
    (r"\bstd::(?:ptrdiff_t|nullptr_t|byte|max_align_t)\b|\boffsetof\s*\(", {"cstddef", "stddef.h"}, "cstddef"),
    (r"\bstd::(?:string|to_string|stoi|stol|stoul|stoull|stod|getline)\b", {"string"}, "string"),
    (r"\bstd::string_view\b", {"string_view"}, "string_view"),
    (r"\bstd::vector\b", {"vector"}, "vector"),
    (r"\bstd::(?:map|multimap)\b", {"map"}, "map"),
    (r"\bstd::unordered_map\b", {"unordered_map"}, "unordered_map"),
    (r"\bstd::(?:set|multiset)\b", {"set"}, "set"),
    (r"\bstd::unordered_set\b", {"unordered_set"}, "unordered_set"),
    (r"\bstd::deque\b", {"deque"}, "deque"),
    (r"\bstd::list\b", {"list"}, "list"),
    (r"\bstd::array\b", {"array"}, "array"),
    (r"\bstd::(?:optional|nullopt|make_optional)\b", {"optional"}, "optional"),
    (r"\bstd::(?:variant|visit|holds_alternative|monostate)\b", {"variant"}, "variant"),
    (r"\bstd::function\b", {"functional"}, "functional"),
    (r"\bstd::(?:unique_ptr|shared_ptr|weak_ptr|make_unique|make_shared|enable_shared_from_this)\b",
     {"memory"}, "memory"),
    (r"\bstd::(?:mutex|lock_guard|unique_lock|scoped_lock|call_once|once_flag|recursive_mutex|timed_mutex)\b",
     {"mutex"}, "mutex"),
    (r"\bstd::shared_mutex\b|\bstd::shared_lock\b", {"shared_mutex"}, "shared_mutex"),
    (r"\bstd::condition_variable(?:_any)?\b", {"condition_variable"}, "condition_variable"),
    (r"\bstd::(?:thread|jthread|this_thread)\b", {"thread"}, "thread"),
    (r"\bstd::(?:atomic|atomic_ref|atomic_flag|memory_order\w*)\b", {"atomic"}, "atomic"),
    (r"\bstd::chrono\b", {"chrono"}, "chrono"),
    (r"\bstd::(?:sort|stable_sort|min|max|minmax|min_element|max_element|fill|fill_n|find|find_if|count|count_if"
     r"|reverse|unique|remove_if|any_of|all_of|none_of|lower_bound|upper_bound|equal|clamp|copy|copy_n"
     r"|transform|for_each|binary_search|rotate|nth_element|partial_sort|shuffle|mismatch|search)\s*[(<]",
     {"algorithm"}, "algorithm"),
    (r"\bstd::ranges::", {"algorithm", "ranges"}, "algorithm"),
    (r"\bstd::(?:move|forward|swap|pair|make_pair|exchange|declval|in_place|as_const|index_sequence"
     r"|make_index_sequence|integer_sequence)\b", {"utility", "algorithm", "tuple", "map", "unordered_map"}, "utility"),
    (r"\bstd::(?:tuple|make_tuple|tie|get|apply|tuple_size)\b", {"tuple", "utility", "array", "variant"}, "tuple"),
    (r"\bstd::numeric_limits\b", {"limits"}, "limits"),
    (r"\bstd::(?:iota|accumulate|gcd|lcm|inner_product|partial_sum|reduce)\s*\(", {"numeric"}, "numeric"),
    (r"\bstd::(?:memcpy|memset|memcmp|memmove|strlen|strcmp|strncmp|strchr|strrchr|strstr|strerror|strncpy"
     r"|strcpy|strcat|strtok|memchr)\b|(?<![\w:.>])(?:memcpy|memset|memcmp|memmove|strlen|strcmp|strncmp|strchr"
     r"|strrchr|strstr|strerror|strncpy|memchr)\s*\(", CSTRING, "cstring"),
    (r"\bstd::(?:printf|fprintf|snprintf|sprintf|vsnprintf|fputs|puts|fopen|fclose|fflush|fgets|fread|fwrite"
     r"|sscanf|fscanf|perror|remove|rename|FILE)\b|(?<![\w:.>])(?:printf|fprintf|snprintf|vsnprintf|fputs|puts"
     r"|fopen|fclose|fflush|fgets|sscanf|fscanf|perror|fileno|setvbuf)\s*\(|(?<![\w:])FILE\s*\*|\bstdout\b|\bstderr\b",
     CSTDIO, "cstdio"),
    (r"\bstd::(?:getenv|atoi|atol|atof|strtol|strtoul|strtoll|strtoull|strtod|abort|exit|_Exit|malloc|calloc"
     r"|realloc|free|qsort|abs|llabs|rand|srand|setenv|system|aligned_alloc)\s*\(|(?<![\w:.>])(?:getenv|atoi|atol"
     r"|atof|strtol|strtoul|strtoll|strtoull|strtod|setenv|unsetenv|mkstemp|mkdtemp|posix_memalign|realpath)\s*\("
     r"|\bEXIT_(?:SUCCESS|FAILURE)\b", CSTDLIB, "cstdlib"),
    (r"\bstd::(?:runtime_error|logic_error|invalid_argument|out_of_range|length_error|overflow_error"
     r"|range_error|domain_error)\b", {"stdexcept"}, "stdexcept"),
    (r"\bstd::(?:exception|exception_ptr|current_exception|rethrow_exception|terminate)\b",
     {"exception", "stdexcept", "new", "typeinfo", "future"}, "exception"),
    (r"\bstd::bad_alloc\b|\bstd::nothrow\b|\bstd::align_val_t\b", {"new"}, "new"),
    (r"\bstd::(?:ostringstream|istringstream|stringstream)\b", {"sstream"}, "sstream"),
    (r"\bstd::(?:ifstream|ofstream|fstream)\b", {"fstream"}, "fstream"),
    (r"\bstd::(?:cout|cerr|cin|clog)\b", {"iostream"}, "iostream"),
    (r"\bstd::(?:setw|setfill|setprecision|hex|dec|fixed)\b", {"iomanip", "ios", "iostream", "sstream", "ostream",
                                                               "fstream", "istream"}, "iomanip"),
    (r"\bstd::span\b|\bstd::as_bytes\b|\bstd::dynamic_extent\b", {"span"}, "span"),
    (r"\bstd::(?:isfinite|isnan|isinf|sqrt|pow|exp|log|log2|log10|floor|ceil|round|lround|llround|fabs|fmod"
     r"|ldexp|frexp|nextafter|copysign|signbit|trunc|fmin|fmax|cbrt)\s*\(", {"cmath"}, "cmath"),
    (r"(?<![\w:.>])errno\b|\bE(?:AGAIN|INTR|WOULDBLOCK|INPROGRESS|ENOENT_NEVER)\b", {"cerrno", "errno.h"}, "cerrno"),
    (r"\bstd::(?:mt19937(?:_64)?|random_device|uniform_int_distribution|uniform_real_distribution"
     r"|normal_distribution|default_random_engine|bernoulli_distribution|minstd_rand)\b", {"random"}, "random"),
    (r"\bstd::(?:regex|regex_search|regex_match|smatch|cmatch)\b", {"regex"}, "regex"),
    (r"\bstd::filesystem\b", {"filesystem"}, "filesystem"),
    (r"\bstd::bitset\b", {"bitset"}, "bitset"),
    (r"\bstd::(?:barrier|latch|counting_semaphore|binary_semaphore)\b", {"barrier", "latch", "semaphore"}, "barrier"),
    (r"\bstd::initializer_list\b", {"initializer_list", "vector", "string", "map", "set", "array", "algorithm",
                                    "unordered_map", "unordered_set", "deque", "list", "utility"}, "initializer_list"),
    (r"\bstd::(?:is_same_v|is_same|enable_if_t|enable_if|conditional_t|decay_t|remove_cv_t|remove_reference_t"
     r"|is_integral_v|is_floating_point_v|is_signed_v|is_unsigned_v|is_trivially_copyable_v|underlying_type_t"
     r"|is_pointer_v|is_enum_v|make_unsigned_t|make_signed_t|integral_constant|true_type|false_type)\b",
     {"type_traits", "utility", "tuple", "memory", "functional", "string", "vector", "array", "optional",
      "variant", "atomic", "algorithm", "limits", "chrono", "span", "concepts", "bit"}, "type_traits"),
    (r"\bstd::(?:bit_cast|popcount|countl_zero|countr_zero|has_single_bit|bit_width|bit_ceil|bit_floor)\b",
     {"bit"}, "bit"),
    (r"\bstd::(?:future|promise|async|packaged_task)\b", {"future"}, "future"),
    (r"\bstd::(?:queue|priority_queue)\b", {"queue"}, "queue"),
    (r"\bstd::(?:source_location)\b", {"source_location"}, "source_location"),
    (r"\bstd::(?:hash)\b", {"functional", "string", "string_view", "unordered_map", "unordered_set", "memory",
                            "optional", "variant", "thread", "bitset", "typeindex", "system_error"}, "functional"),
    (r"\bstd::(?:strong_ordering|weak_ordering|partial_ordering)\b", {"compare"}, "compare"),
    (r"\bstd::(?:time_t|tm|strftime|localtime_r|gmtime_r)\b|(?<![\w:.>])(?:strftime|localtime_r|gmtime_r)\s*\(",
     {"ctime", "time.h", "chrono"}, "ctime"),
    (r"\bstd::(?:va_list)\b|\bva_start\s*\(|\bva_list\b", {"cstdarg", "stdarg.h", "cstdio", "stdio.h"}, "cstdarg"),
    (r"\bstd::(?:error_code|system_error|generic_category|system_category|errc)\b", {"system_error"}, "system_error"),
    (r"\bstd::(?:isalpha|isdigit|isspace|isalnum|isxdigit|tolower|toupper|isupper|islower|isprint)\s*\(",
     {"cctype", "ctype.h"}, "cctype"),
    (r"\bstd::(?:signal|raise|sig_atomic_t)\b", {"csignal", "signal.h"}, "csignal"),
    (r"\bstd::(?:setjmp|longjmp|jmp_buf)\b", {"csetjmp", "setjmp.h"}, "csetjmp"),
    (r"\bstd::(?:begin|end|size|data|distance|advance|next|prev|back_inserter|inserter|make_move_iterator"
     r"|ssize|reverse_iterator|istreambuf_iterator|ostream_iterator)\b",
     {"iterator", "array", "vector", "string", "string_view", "map", "set", "unordered_map", "unordered_set",
      "deque", "list", "span", "regex", "optional", "algorithm", "memory"}, "iterator"),
]
COMPILED = [(re.compile(p), provides, fix) for p, provides, fix in RULES]

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def strip_code(text):
    """The text with comments, string and char literals blanked (lines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = text.find("(", i + 2)
            delim = text[i + 2:k]
            j = text.find(")" + delim + '"', k)
            j = n if j < 0 else j + len(delim) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        elif c == "#" and re.match(r"#\s*include\b", text[i:i + 16]):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Checker:
    def __init__(self, root):
        self.root = root
        self.direct = {}  # path -> (std headers, project headers)

    def resolve(self, including, name):
        for base in [os.path.dirname(including)] + [os.path.join(self.root, r) for r in INCLUDE_ROOTS]:
            p = os.path.normpath(os.path.join(base, name))
            if os.path.isfile(p):
                return p
        return None

    def includes(self, path):
        if path not in self.direct:
            std, ours = set(), set()
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for kind, name in INCLUDE_RE.findall(text):
                resolved = self.resolve(path, name) if kind == '"' else None
                if resolved:
                    ours.add(resolved)
                else:
                    std.add(name)
            self.direct[path] = (std, ours)
        return self.direct[path]

    def provided(self, path):
        """Standard headers the file gets from its own includes and the project headers it includes."""
        std, seen, todo = set(), set(), [path]
        while todo:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            s, ours = self.includes(p)
            std |= s
            todo.extend(ours)
        return std

    def missing(self, path):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if "check_includes: fragment" in text:  # an X-macro list included mid-function: its includer's job
            return []
        code = strip_code(text)
        have = self.provided(path)
        found = []
        for rx, provides, fix in COMPILED:
            if have & provides:
                continue
            m = rx.search(code)
            if m:
                line = code.count("\n", 0, m.start()) + 1
                found.append((fix, m.group(0).strip(), line))
        return found


def add_includes(path, headers):
    """Adds #include <h> for each header, in sorted place within the file's last block of standard
    includes (or after its last include, or after the leading comments)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for h in sorted(headers):
        text = "#include <%s>" % h
        std_lines = [i for i, l in enumerate(lines) if re.match(r"\s*#\s*include\s*<", l)]
        if std_lines:
            end = std_lines[-1]
            start = end
            while start - 1 in std_lines:
                start -= 1
            at = end + 1
            for i in range(start, end + 1):
                if lines[i].strip() > text:
                    at = i
                    break
        else:
            any_lines = [i for i, l in enumerate(lines) if re.match(r"\s*#\s*include\b", l)]
            if any_lines:
                at = any_lines[0]
            else:
                at = 0
                while at < len(lines) and (lines[at].startswith("//") or lines[at].startswith("#pragma")):
                    at += 1
        lines[at:at] = [text]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def self_test():
    """The checker flags a file that gets <cstdint> only through <string>, and accepts one that
    gets it through a project header; exit 0 when both hold."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "src"))
        files = {
            "src/relies.cc": "#include <string>\n// uint64_t in a comment is no use\nuint64_t f(std::string s);\n",
            "src/ours.h": "#pragma once\n#include <cstdint>\n",
            "src/through_ours.cc": '#include "ours.h"\nuint32_t g();\nconst char* t = "memcpy(";\n',
        }
        for name, text in files.items():
            with open(os.path.join(root, name), "w") as f:
                f.write(text)
        c = Checker(root)
        relies = c.missing(os.path.join(root, "src/relies.cc"))
        ok = [h for h, _, _ in relies] == ["cstdint"] and relies[0][2] == 3
        ok = ok and c.missing(os.path.join(root, "src/through_ours.cc")) == []
        print("check_includes self-test: %s" % ("ok" if ok else "FAILED: %r" % relies))
        return 0 if ok else 1


def main(argv):
    if "--self-test" in argv:
        return self_test()
    fix = "--fix" in argv
    args = [a for a in argv if not a.startswith("--")]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
    checker = Checker(root)
    files = []
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            files += [os.path.join(dirpath, n) for n in names if n.endswith(SUFFIXES)]
    problems = 0
    for path in sorted(files):
        found = checker.missing(path)
        if not found:
            continue
        rel = os.path.relpath(path, root)
        for header, name, line in found:
            print("%s:%d: uses '%s' but includes no <%s> (directly or through a project header)" % (rel, line, name, header))
        problems += len(found)
        if fix:
            add_includes(path, {h for h, _, _ in found})
    if problems:
        print("check_includes: %d missing standard include(s) in %s%s" % (
            problems, "these files" if not fix else "files now fixed", "" if fix else "; scripts/check_includes.py --fix adds them"))
        return 0 if fix else 1
    print("check_includes: %d files, every standard name used is included" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
