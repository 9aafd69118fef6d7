#!/bin/bash
set -euo pipefail
# Typed into an interactive shell (the agent's terminal), a TAB is readline's completion key, not a character:
# the recipes use GNU make's .RECIPEPREFIX instead of TABs so the same solution works typed or run as a script.
cat > /app/Makefile <<'MK'
.RECIPEPREFIX = >
CC      := gcc
CFLAGS  := -Wall -O2 -Iinclude
SRCS    := $(wildcard src/*.c)
OBJS    := $(patsubst src/%.c,build/%.o,$(SRCS))
HEADERS := $(wildcard include/*.h)

build/greet: $(OBJS)
> $(CC) $(CFLAGS) -o $@ $^

build/%.o: src/%.c $(HEADERS) | build
> $(CC) $(CFLAGS) -c -o $@ $<

build:
> mkdir -p build

clean:
> rm -rf build

.PHONY: clean
MK
cd /app && make
