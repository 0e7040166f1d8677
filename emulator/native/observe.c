/*
 * pkasim observer: function entry and exit at block starts, and a buffer of events.
 *
 * pk_obs_block_hook() is a Unicorn block hook installed after the cycle hook
 * (cyclehook.c), so it runs second at each block start, and only while something
 * observes. By then the cycle hook has committed everything executed before this
 * block, so the committed cycle and instruction counts it reads are exactly the
 * model's time at the start of the block: an event stamped with them splits the
 * run into intervals that add up to the run's total, whatever happens between two
 * blocks (exception entry cost, sleep, semihosting), because every such cost is
 * committed before the next stamp is taken.
 *
 * Calls and returns are found from how the block executed before this one ended,
 * looked up in a per-halfword class table Python builds once per image (the class
 * of an instruction sits at its last halfword, where a block that ends with it ends):
 *   - a call (BL, BLX) : this block is the callee; push a frame whose return address
 *                        is the end of the calling block;
 *   - a return-capable branch (BX, POP {..,pc}, MOV/ADD pc): if this block starts at
 *                        the return address of a frame (the top one, or one a little
 *                        deeper), pop down to it;
 *   - anything else, or no frame matched: if this block lies in another function
 *                        than the top frame's, it is a jump into that function (a tail
 *                        call, a fall-through, an indirect jump): the top frame now
 *                        runs that function.
 * A block that starts inside the previous block's range is a resumption (after a
 * stop mid-block: WFI, a fault, a breakpoint, a step): nothing is inferred from it.
 *
 * Exception entry and return are not seen here (Unicorn does neither): whoever
 * models them calls pk_obs_emit(), which pushes an exception frame that remembers the
 * interrupted block, and pops back to it at the return, so a call whose callee had
 * not started yet when the exception came is still seen as a call after it.
 *
 * The profile is kept here too, as a calling-context tree: one node per distinct
 * call path, with its calls, exclusive cycles and instructions, wait cycles and the
 * PKA busy time of the operations it started. Every block start and every emitted
 * event first gives the interval since the previous one to the node on top of the
 * stack (advance()), so the nodes' cycles add up exactly to the cycles observed, and
 * profiling alone costs no Python call at all (emulator/analysis/profiler.py reads the tree).
 *
 * Events are buffered only while an observer wants them (``record``). When the buffer
 * holds ``soft`` events, the hook sets the cycle hook's deadline to 0: the cycle hook
 * then stops the run at the next block start, exactly as for any other deadline, and
 * the run loop drains the buffer. Past ``cap`` the buffer grows: no event is lost.
 */
#include <stdlib.h>
#include <string.h>

#include "observe.h"

#define PK_CLS_CALL 0x01 /* BL, BLX Rm */
#define PK_CLS_RET 0x02  /* BX Rm, POP {..., pc}, MOV pc, Rm, ADD pc, Rm */

#define MAX_RANGES 4
#define MAX_DEPTH (1u << 16) /* deeper calls are counted in ``overflow``, not tracked */
#define RETURN_SEARCH 32     /* frames below the top searched for a return address */

enum { FRAME_CALL = 0, FRAME_EXC = 1 };

typedef struct {
    uint32_t fn;   /* function running in this frame */
    uint32_t ret;  /* return address (call frames) */
    uint32_t kind; /* FRAME_CALL or FRAME_EXC */
    uint32_t exc;  /* exception number (exception frames) */
    uint32_t node; /* its node in the call tree */
    /* the block executed before the exception came (exception frames) */
    uint32_t saved_valid, saved_start, saved_end, saved_cls;
} pk_obs_frame;

/* One call path. Node 0 is the root (time observed with no frame). */
typedef struct {
    int32_t fn;       /* function index, or -(exception number) for an exception */
    uint32_t parent;  /* node index */
    uint32_t child;   /* first child, 0 = none */
    uint32_t sibling; /* next child of the same parent, 0 = none */
    uint64_t calls, cycles, insns, wait, pka_busy, pka_ops;
} pk_obs_node;

typedef struct {
    uint32_t base, halfwords;
    const uint8_t *cls;
    const uint16_t *fn;
} pk_obs_range;

struct pk_obs {
    /* read by Python: emulator/core/observe.py mirrors these fields, in this order */
    pk_obs_event *events;
    uint32_t used, cap;
    uint32_t soft;
    uint32_t depth;
    uint64_t overflow;
    pk_obs_node *nodes;
    uint32_t nnodes, nodes_cap;
    uint32_t record;      /* buffer events (an observer wants them) */
    uint32_t pad;
    /* the cycle hook's counters (fields of its pk_state) */
    const uint64_t *cycles, *insns;
    uint64_t *deadline;
    const uint32_t *cur_valid, *cur_start;
    /* per-image tables */
    pk_obs_range ranges[MAX_RANGES];
    uint32_t nranges;
    /* the call stack */
    pk_obs_frame *stack;
    uint32_t stack_cap;
    /* the last block seen */
    uint32_t prev_valid, prev_start, prev_end, prev_cls;
    /* accounting: counts up to which every cycle has been given to a node; stamps
     * never go back (an access late in a block is stamped with its own cycle; an
     * event after it in the same block, stamped with the block's start, takes it) */
    uint64_t last_cycle, last_insns;
    uint32_t spinning, spin_node; /* a node polls a busy PKA until it finishes */
    /* another native consumer of every emitted event (ct-check's cthash.c), or NULL */
    void (*ext)(void *ctx, uint32_t kind, uint64_t cycle, uint32_t a, uint64_t b);
    void *ext_ctx;
};

static const pk_obs_range *range_of(const pk_obs *o, uint32_t a) {
    for (uint32_t i = 0; i < o->nranges; i++) {
        const pk_obs_range *r = &o->ranges[i];
        if (a >= r->base && ((a - r->base) >> 1) < r->halfwords) return r;
    }
    return NULL;
}

static uint32_t fn_at(const pk_obs *o, uint32_t a) {
    const pk_obs_range *r = range_of(o, a);
    return r ? r->fn[(a - r->base) >> 1] : 0;
}

static uint32_t cls_at(const pk_obs *o, uint32_t a) {
    const pk_obs_range *r = range_of(o, a);
    return r ? r->cls[(a - r->base) >> 1] : 0;
}

/* ------------------------------------------------------------------ the call tree */

static uint32_t top_node(const pk_obs *o) { return o->depth ? o->stack[o->depth - 1].node : 0; }

/* The child of ``parent`` for ``fn`` (created on first use), its calls counted. */
static uint32_t enter(pk_obs *o, uint32_t parent, int32_t fn) {
    uint32_t i = o->nodes[parent].child;
    while (i && o->nodes[i].fn != fn) i = o->nodes[i].sibling;
    if (!i) {
        if (o->nnodes == o->nodes_cap) {
            uint32_t cap = o->nodes_cap * 2;
            pk_obs_node *n = realloc(o->nodes, (size_t)cap * sizeof(pk_obs_node));
            if (!n) return parent; /* out of memory: the time stays with the caller */
            o->nodes = n;
            o->nodes_cap = cap;
        }
        i = o->nnodes++;
        pk_obs_node *n = &o->nodes[i];
        memset(n, 0, sizeof *n);
        n->fn = fn;
        n->parent = parent;
        n->sibling = o->nodes[parent].child;
        o->nodes[parent].child = i;
    }
    o->nodes[i].calls++;
    return i;
}

/* Give every cycle and instruction since the last event to the node on top. */
static void advance(pk_obs *o, uint64_t cycle) {
    if (cycle < o->last_cycle) cycle = o->last_cycle;
    uint32_t top = top_node(o);
    pk_obs_node *n = &o->nodes[top];
    uint64_t dc = cycle - o->last_cycle;
    n->cycles += dc;
    n->insns += *o->insns - o->last_insns;
    if (o->spinning && o->spin_node == top) n->wait += dc;
    o->last_cycle = cycle;
    o->last_insns = *o->insns;
}

/* ------------------------------------------------------------------ events */

static void record(pk_obs *o, uint32_t kind, uint32_t a, uint64_t b) {
    if (!o->record) return;
    if (o->used == o->cap) {
        uint32_t cap = o->cap ? o->cap * 2 : 4096;
        pk_obs_event *n = realloc(o->events, (size_t)cap * sizeof(pk_obs_event));
        if (!n) return; /* out of memory: Python sees the stack depth disagree */
        o->events = n;
        o->cap = cap;
    }
    pk_obs_event *e = &o->events[o->used++];
    e->cycle = o->last_cycle;
    e->insns = o->last_insns;
    e->b = b;
    e->kind = kind;
    e->a = a;
    e->fn = o->depth ? o->stack[o->depth - 1].fn : 0;
    e->depth = o->depth;
    if (o->used >= o->soft) *o->deadline = 0;
}

static pk_obs_frame *push(pk_obs *o) {
    if (o->depth >= MAX_DEPTH) {
        o->overflow++;
        return NULL;
    }
    if (o->depth == o->stack_cap) {
        uint32_t cap = o->stack_cap ? o->stack_cap * 2 : 256;
        pk_obs_frame *n = realloc(o->stack, (size_t)cap * sizeof(pk_obs_frame));
        if (!n) {
            o->overflow++;
            return NULL;
        }
        o->stack = n;
        o->stack_cap = cap;
    }
    pk_obs_frame *f = &o->stack[o->depth++];
    memset(f, 0, sizeof *f);
    return f;
}

static void push_call(pk_obs *o, uint32_t fn, uint32_t ret) {
    uint32_t parent = top_node(o);
    pk_obs_frame *f = push(o);
    if (!f) return;
    f->fn = fn;
    f->ret = ret;
    f->kind = FRAME_CALL;
    f->node = enter(o, parent, (int32_t)fn);
    record(o, PK_EV_CALL, fn, ret);
}

static void pop_calls_to(pk_obs *o, uint32_t keep, uint32_t to) {
    while (o->depth > keep) {
        uint32_t fn = o->stack[o->depth - 1].fn;
        o->depth--;
        record(o, PK_EV_RETURN, fn, to);
    }
}

void pk_obs_block_hook(void *uc, uint64_t address, uint32_t size, pk_obs *o) {
    (void)uc;
    uint32_t a = (uint32_t)address;
    if (!*o->cur_valid || *o->cur_start != a) return; /* the cycle hook stopped before it */
    advance(o, *o->cycles);
    uint32_t fn = fn_at(o, a);

    if (o->prev_valid && (a < o->prev_start || a >= o->prev_end)) {
        if (o->prev_cls & PK_CLS_CALL) {
            push_call(o, fn, o->prev_end);
        } else if ((o->prev_cls & PK_CLS_RET) && o->depth) {
            for (uint32_t i = o->depth, n = 0; i > 0 && n < RETURN_SEARCH; i--, n++) {
                const pk_obs_frame *f = &o->stack[i - 1];
                if (f->kind != FRAME_CALL) break;
                if (f->ret == a) {
                    pop_calls_to(o, i - 1, a);
                    break;
                }
            }
        }
    }
    if (o->depth == 0) {
        push_call(o, fn, 0);
    } else if (o->stack[o->depth - 1].fn != fn) {
        pk_obs_frame *f = &o->stack[o->depth - 1];
        uint32_t old = f->fn;
        f->fn = fn;
        f->node = enter(o, o->nodes[f->node].parent, (int32_t)fn);
        record(o, PK_EV_TAILCALL, fn, old);
    }
    o->prev_valid = 1;
    o->prev_start = a;
    o->prev_end = a + size;
    o->prev_cls = size >= 2 ? cls_at(o, a + size - 2) : 0;
}

void pk_obs_emit(void *obs, uint32_t kind, uint64_t cycle, uint32_t a, uint64_t b) {
    pk_obs *o = obs;
    if (!o) return;
    if (o->ext) o->ext(o->ext_ctx, kind, cycle, a, b);
    advance(o, cycle);
    switch (kind) {
    case PK_EV_EXC_ENTRY: {
        uint32_t parent = top_node(o);
        pk_obs_frame *f = push(o);
        if (f) {
            f->fn = fn_at(o, (uint32_t)b & ~1u);
            f->kind = FRAME_EXC;
            f->exc = a;
            f->node = enter(o, enter(o, parent, -(int32_t)a), (int32_t)f->fn);
            f->saved_valid = o->prev_valid;
            f->saved_start = o->prev_start;
            f->saved_end = o->prev_end;
            f->saved_cls = o->prev_cls;
        }
        o->prev_valid = 0;
        record(o, kind, a, b);
        return;
    }
    case PK_EV_EXC_RETURN: {
        uint32_t i = o->depth;
        while (i > 0 && o->stack[i - 1].kind != FRAME_EXC) i--;
        if (i == 0) {
            /* no exception frame (observation began inside a handler): start over */
            pop_calls_to(o, 0, 0);
            o->prev_valid = 0;
            record(o, kind, a, 0);
            return;
        }
        pop_calls_to(o, i, 0); /* calls the handler never returned from */
        pk_obs_frame *f = &o->stack[i - 1];
        o->prev_valid = f->saved_valid;
        o->prev_start = f->saved_start;
        o->prev_end = f->saved_end;
        o->prev_cls = f->saved_cls;
        o->depth = i - 1;
        record(o, kind, a, b);
        return;
    }
    case PK_EV_SLEEP:
    case PK_EV_SPIN: {
        pk_obs_node *n = &o->nodes[top_node(o)];
        record(o, kind, a, b); /* stamped at the start of the wait */
        n->cycles += b;
        n->wait += b;
        o->last_cycle += b;
        return;
    }
    case PK_EV_PKA_START: {
        pk_obs_node *n = &o->nodes[top_node(o)];
        n->pka_busy += b;
        n->pka_ops += 1;
        break;
    }
    case PK_EV_PKA_POLL:
        if (!o->spinning) {
            o->spinning = 1;
            o->spin_node = top_node(o);
        }
        break;
    case PK_EV_PKA_FINISH:
        o->spinning = 0;
        break;
    case PK_EV_RESET:
        o->depth = 0;
        o->prev_valid = 0;
        o->spinning = 0;
        break;
    default:
        break;
    }
    record(o, kind, a, b);
}

/* ------------------------------------------------------------------ set-up */

static int reset_tree(pk_obs *o) {
    if (!o->nodes) {
        o->nodes = malloc(256 * sizeof(pk_obs_node));
        if (!o->nodes) return -1;
        o->nodes_cap = 256;
    }
    memset(&o->nodes[0], 0, sizeof(pk_obs_node));
    o->nnodes = 1;
    return 0;
}

pk_obs *pk_obs_new(const uint64_t *cycles, const uint64_t *insns, uint64_t *deadline,
                   const uint32_t *cur_valid, const uint32_t *cur_start, uint32_t soft) {
    pk_obs *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->cycles = cycles;
    o->insns = insns;
    o->deadline = deadline;
    o->cur_valid = cur_valid;
    o->cur_start = cur_start;
    o->soft = soft ? soft : 1;
    o->last_cycle = *cycles;
    o->last_insns = *insns;
    if (reset_tree(o) != 0) {
        free(o);
        return NULL;
    }
    return o;
}

/* Tables over [base, base + 2 * halfwords): instruction class and function index per
 * halfword. Python keeps the arrays alive while the observer uses them. */
int pk_obs_add_range(pk_obs *o, uint32_t base, uint32_t halfwords, const uint8_t *cls, const uint16_t *fn) {
    if (o->nranges == MAX_RANGES) return -1;
    pk_obs_range *r = &o->ranges[o->nranges++];
    r->base = base;
    r->halfwords = halfwords;
    r->cls = cls;
    r->fn = fn;
    return 0;
}

/* New image: forget the tables, the call stack, the tree and the last block; the
 * count starts again from the machine's (a load sets it to 0). */
void pk_obs_clear_ranges(pk_obs *o) {
    o->nranges = 0;
    o->depth = 0;
    o->prev_valid = 0;
    o->spinning = 0;
    o->last_cycle = *o->cycles;
    o->last_insns = *o->insns;
    reset_tree(o);
}

/* Hand every emitted event to ``fn`` too (NULL: no longer). */
void pk_obs_set_ext(pk_obs *o, void (*fn)(void *, uint32_t, uint64_t, uint32_t, uint64_t), void *ctx) {
    o->ext = fn;
    o->ext_ctx = ctx;
}

/* Python has read every event. */
void pk_obs_drained(pk_obs *o) { o->used = 0; }

void pk_obs_free(pk_obs *o) {
    if (!o) return;
    free(o->events);
    free(o->stack);
    free(o->nodes);
    free(o);
}

uint32_t pk_obs_sizeof_event(void) { return (uint32_t)sizeof(pk_obs_event); }
uint32_t pk_obs_sizeof_node(void) { return (uint32_t)sizeof(pk_obs_node); }
