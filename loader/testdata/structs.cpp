// Structs for loader's DWARF tests (dwarf_test.go). The objects are
// committed, built with:
//   g++ -g -O0 -c structs.cpp -o structs.o
//   g++ -gdwarf-2 -O0 -c structs.cpp -o structs-dwarf2.o
//   g++ -g -O0 -DMOVED -c structs.cpp -o moved.o && ld -r structs.o moved.o -o conflict.o
// The static_asserts hold the offsets the tests expect: the compiler checks them.
#include <cstddef>

struct server_task {
    int id;
    int index;
};

struct server_slot {
    int id;
    void * ctx_tgt;
#ifdef MOVED
    bool spec_is_replay;
#endif
    int * spec_draft[3];
    int * spec_i_batch[3];
    const server_task * task;
};

namespace ns {
struct inner {
    char c;
    long v;
};
struct outer {
    struct nested {
        int a;
        int b;
    };
    nested n;
};
}  // namespace ns

namespace {
struct hidden {
    int a;
    short b;
};
}  // namespace

struct with_bits {
    int a : 3;
    int b : 5;
};

struct with_static {
    int a;
    static int s;
};
#ifndef MOVED
int with_static::s = 0;
#endif

#ifndef MOVED
static_assert(offsetof(server_slot, id) == 0, "");
static_assert(offsetof(server_slot, spec_draft) == 16, "");
static_assert(offsetof(server_slot, spec_i_batch) == 40, "");
static_assert(offsetof(server_slot, task) == 64, "");
#else
static_assert(offsetof(server_slot, task) == 72, "");
#endif
static_assert(offsetof(server_task, index) == 4, "");
static_assert(offsetof(ns::inner, v) == 8, "");
static_assert(offsetof(ns::outer::nested, b) == 4, "");
static_assert(offsetof(hidden, b) == 4, "");

// Build numbers (fields_test.go): one in .data, one zero in .bss.
#ifndef MOVED
int LLAMA_BUILD_NUMBER = 10573;
int ZERO_BUILD = 0;
#endif

// static and used: each object keeps its own (conflict.o links two).
static server_slot g_slot __attribute__((used));
static server_task g_task __attribute__((used));
static ns::inner g_inner __attribute__((used));
static ns::outer g_outer __attribute__((used));
static hidden g_hidden __attribute__((used));
static with_bits g_bits __attribute__((used));
static with_static g_static __attribute__((used));
