#!/bin/sh
# A CUDA build's check that a build without CUDA would still link: every weft::cuda function the
# host-side objects call must be defined by src/cuda/device_emulated.cc, the stand-in a build
# without the toolkit links instead of the GPU path. (device_emulated.cc names each declaration it
# defines, so a signature that drifts already fails to compile; this catches a function it lacks.)
#   sh cuda_stand_in_test.sh BUILD_DIR STAND_IN_OBJECT
# The objects checked are those the build's current targets make (`ninja -t targets`, so objects
# of deleted sources left in a reused build directory do not count), except those of the targets
# only CUDA builds make (the GPU path itself, the stand-in, the GPU tests).
set -u
BUILD=$1
STAND_IN=$2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/cuda-stand-in-test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

[ -f "$STAND_IN" ] || fail "no stand-in object at $STAND_IN"
ninja -C "$BUILD" -t targets all 2>/dev/null | sed -n 's/^\([^:]*\.o\): .*/\1/p' |
  grep -v -e '/weft_cuda\.dir/' -e '/weft_cuda_stand_in_check\.dir/' -e '/nccl_device_test\.dir/' \
    -e '/reduce_device_test\.dir/' -e '/walker_test\.dir/' |
  while read -r o; do [ -f "$BUILD/$o" ] && echo "$BUILD/$o"; done >"$TMP/objects"
[ -s "$TMP/objects" ] || fail "no objects of $BUILD's targets (is it a Ninja build directory?)"
# Undefined references into weft::cuda, and the stand-in's definitions (demangled, one a line).
xargs nm -C -u <"$TMP/objects" 2>/dev/null | sed -n 's/^ *U \(weft::cuda::.*\)$/\1/p' | sort -u >"$TMP/needed"
nm -C --defined-only "$STAND_IN" | sed -n 's/^[0-9a-f]* [TW] \(weft::cuda::.*\)$/\1/p' | sort -u >"$TMP/defined"
[ -s "$TMP/needed" ] || fail "no host object refers to weft::cuda (did the search find the build's objects?)"
comm -23 "$TMP/needed" "$TMP/defined" >"$TMP/missing"
if [ -s "$TMP/missing" ]; then
  echo "FAIL: src/cuda/device_emulated.cc lacks what host code calls (a build without CUDA would not link):"
  cat "$TMP/missing"
  exit 1
fi
echo "PASS: the stand-in defines all $(wc -l <"$TMP/needed") weft::cuda functions host code calls"
