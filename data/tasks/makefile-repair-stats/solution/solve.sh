#!/bin/bash
set -euo pipefail
# Typed into an interactive shell (the agent's terminal), a TAB is readline's completion key, not a character:
# the recipes use GNU make's .RECIPEPREFIX instead of TABs so the same solution works typed or run as a script.
cat > /app/Makefile <<'MK'
.RECIPEPREFIX = >
CC      = gcc
CFLAGS  = -Wall -O2 -Iinclude
LDLIBS  = -lm
PREFIX  = /usr/local
HEADERS = $(wildcard include/*.h)

all: build/statcalc

build/statcalc: build/main.o build/stats.o
> $(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

build/%.o: src/%.c $(HEADERS) | build
> $(CC) $(CFLAGS) -c $< -o $@

build/test_stats: tests/test_stats.c build/stats.o $(HEADERS) | build
> $(CC) $(CFLAGS) -o $@ tests/test_stats.c build/stats.o $(LDLIBS)

build:
> mkdir -p build

test: build/test_stats
> ./build/test_stats

install: build/statcalc
> install -d $(PREFIX)/bin
> install -m 755 build/statcalc $(PREFIX)/bin/statcalc

clean:
> rm -rf build

.PHONY: all test install clean
MK
cd /app && make
