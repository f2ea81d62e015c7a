"""Message sizes as the perf scripts (compare.py, socket_vs_raw.py) read and print them:
"64K", "1M", "2G" or plain bytes, as nccl-tests' -b/-e take them."""


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def human(n):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)
