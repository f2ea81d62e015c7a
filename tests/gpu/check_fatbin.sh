#!/bin/sh
# The CUDA kernels' fatbin holds every entry point the device backend looks up (12 types x
# (4 reduce ops + scale + divide) + copy = 73) and machine code for each requested arch.
# Usage: check_fatbin.sh <fatbin> "<arch list, ; separated>"
set -u
fatbin=$1 archs=$2
[ -f "$fatbin" ] || { echo "FAIL: $fatbin was not built"; exit 1; }
names=$(strings "$fatbin" | grep -E '^accl_(reduce2|scale|divide|copy)' | sort -u | wc -l)
[ "$names" -eq 73 ] || { echo "FAIL: $names of 73 kernel entry points in $fatbin"; exit 1; }
for arch in $(echo "$archs" | tr ';' ' '); do
  strings "$fatbin" | grep -q -- "-arch sm_$arch" || { echo "FAIL: no sm_$arch code in $fatbin"; exit 1; }
done
echo "OK: 73 kernels, sm $archs, $(wc -c < "$fatbin") bytes"
