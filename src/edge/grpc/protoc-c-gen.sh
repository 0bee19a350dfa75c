#!/bin/sh
# protoc-c-gen.sh PROTOC_C PROTO_ROOT REL_PROTO OUT_DIR
# Generates C for PROTO_ROOT/REL_PROTO into OUT_DIR/<dir of REL_PROTO>/. The `service` blocks are
# dropped first: gpuop's gRPC layer registers methods by path and never uses protobuf-c's RPC
# stubs, which moreover name a struct member after the method (`register`, a C keyword, for
# Registration.Register) and would not compile. Messages are generated unchanged.
set -eu
protoc_c=$1 root=$2 rel=$3 out=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/$(dirname "$rel")"
sed '/^service [A-Za-z0-9_]* *{/,/^}/d' "$root/$rel" >"$tmp/$rel"
"$protoc_c" --proto_path="$tmp" --c_out="$out" "$tmp/$rel"
