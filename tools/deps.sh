#!/bin/sh
# Make sure the Debian packages octet builds against are installed.
# Checks with pkg-config / headers; when something is missing and we are root,
# runs apt-get; otherwise prints the exact apt-get line and fails.
# Usage: tools/deps.sh [build|test|bench|all]
set -e
want="${1:-build}"

missing=""
need_pkg() { # pkg-config-name debian-package
    if ! pkg-config --exists "$1" 2>/dev/null; then missing="$missing $2"; fi
}
need_cmd() { # command debian-package
    if ! command -v "$1" >/dev/null 2>&1; then missing="$missing $2"; fi
}

need_cmd pkg-config pkg-config
need_cmd gcc gcc
need_cmd make make
need_cmd gzip gzip
need_pkg jansson libjansson-dev
need_pkg libpcre2-8 libpcre2-dev
need_pkg libmicrohttpd libmicrohttpd-dev
need_pkg openblas libopenblas-dev
# OpenMP: gcc ships omp.h with the compiler; clang needs libomp's.
cc="${CC:-cc}"
if ! echo '#include <omp.h>' | "$cc" -fopenmp -E - >/dev/null 2>&1; then
    case "$("$cc" --version 2>/dev/null)" in
        *clang*) missing="$missing libomp-dev" ;;
        *) missing="$missing libgomp1" ;;
    esac
fi
case "$want" in
    test|all)
        need_cmd curl curl
        need_cmd node nodejs   # tests/server drive octet serve with the openai npm client
        need_cmd npm npm
        # tests/test_chat_real.c: Jinja2 renders the reference chat templates
        if ! /usr/bin/python3 -c 'import jinja2' >/dev/null 2>&1; then
            missing="$missing python3-jinja2"
        fi
        ;;
esac

if [ -z "$missing" ]; then exit 0; fi
line="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" = 0 ]; then
    echo "deps: installing:$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || true
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >&2
else
    echo "deps: missing Debian packages:$missing" >&2
    echo "deps: run as root:  sudo $line" >&2
    exit 1
fi
