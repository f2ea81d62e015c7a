"""free_port(): a loopback TCP port nobody listens on now, for launchers (perf/gloo_coll_bench.py,
tests/torch). The C++ side has the same rule in tests/common/free_port.h."""
import random
import socket


def free_port() -> int:
    """A loopback port nobody listens on now, picked below the ephemeral range: ports the
    kernel hands out (bind to 0) are those outgoing connections take too, and with tests
    running in parallel one of them sometimes takes the port before the child binds it
    (tests/common/free_port.h says the same for the C++ tests)."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    candidates = [random.randint(10000, low - 1) for _ in range(64)] if low - 10000 >= 1000 else []
    for port in candidates + [0]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("no free loopback port")
