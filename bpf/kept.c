//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// kept_return and kept_fields: stage.c with the programs that see the end of
// a Python 3.10 or 3.11 call whose frame outlives it. They share stage.c's
// code and maps (loaded on the session's own, by name); loaded only for
// such a target, since verifying kept_fields doubles a session's load time.
#define KEPT_RETURN
#include "stage.c"
