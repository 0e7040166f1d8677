/*
 * pkasim's native state: the record the cycle hook (cyclehook.c), the native exception
 * model (excmodel.c), idle loops (idle.c) and the native device fast paths
 * (peripherals/{pka,systick}_fast.c) share; the functions they share are in state.c.
 * emulator/native/__init__.py mirrors pk_state field by field (load() checks the size).
 */
#ifndef PKSTATE_H
#define PKSTATE_H
#include <stddef.h>
#include <stdint.h>

#include "observe.h"
#include "codecache.h" /* pk_block, pk_check; thumb.h: PK_F_* flags, K_* kinds */

/* STOP_ALIGN: the access at align_pc would fault at align_addr. STOP_ALIGN_SPLIT: the
 * address of the access at align_pc is known only when the block reaches it: run the
 * block up to it. STOP_SP_WRITE: the instruction at align_pc sets SP from a register:
 * run the block up to align_addr (the next instruction), then clear SP bits [1:0]. */
enum { STOP_NONE = 0, STOP_DEADLINE = 1, STOP_ALIGN = 2, STOP_IRQCHK = 3, STOP_SLEEP = 4, STOP_LOOPCHK = 5,
       STOP_STUCK = 6, STOP_UNDEF = 7, STOP_WATCH = 8, STOP_NATIVE_ERROR = 9, STOP_ALIGN_SPLIT = 10,
       STOP_SP_WRITE = 11, STOP_PROBE = 12 };

#define RING 64 /* recent block starts: 64 words, so that ring_pos (a byte offset) wraps by itself */

typedef int (*pk_reg_read_fn)(void *uc, int regid, void *value);
typedef int (*pk_emu_stop_fn)(void *uc);
typedef int (*pk_reg_write_fn)(void *uc, int regid, const void *value);
typedef int (*pk_mem_read_fn)(void *uc, uint64_t address, void *bytes, size_t size);
typedef int (*pk_mem_write_fn)(void *uc, uint64_t address, const void *bytes, size_t size);
typedef void (*pk_py_intr_fn)(uint32_t intno);
/* pkasim's engine (patch 25): the M-profile registers an exception entry or return
 * reads and writes, in one call each (Unicorn's uc_arm_m_exc, field for field) */
typedef struct {
    uint32_t xpsr, control, primask, msp, psp, pc;
} pk_mexc;
typedef int (*pk_mexc_fn)(void *uc, pk_mexc *regs);
/* the call probe (cyclehook.c probe_mark): Python's part of a mark (0 the entry, 1 the return) */
typedef void (*pk_probe_fn)(uint32_t mark);
/* Unicorn's uc_ctl, for UC_CTL_TB_REMOVE_CACHE (two uint64_t arguments) */
typedef int (*pk_uc_ctl_fn)(void *uc, uint32_t control, ...);
enum { PROBE_OFF = 0, PROBE_ENTRY = 1, PROBE_CALL = 2, PROBE_DONE = 3, PROBE_STOPPED = 4 };

/* A device with native timed events (peripherals/{pka,systick}_fast.c): its state record and the
 * two functions the core calls at block boundaries. The machine fills the table from
 * what each device's Python model names (core/machine.py), so the core's C never names
 * a device: next() is the cycle of its next event (PK_NO_EVENT if none), due() fires it
 * and is called again while the next event is still due. */
typedef uint64_t (*pk_dev_next_fn)(void *dev);
typedef void (*pk_dev_due_fn)(void *dev);
typedef struct {
    void *dev;
    pk_dev_next_fn next;
    pk_dev_due_fn due;
} pk_device;
#define PK_DEVICES 8

/* Loop verdicts kept (idle.c), indexed by (key >> 1) & (PK_VERDICTS - 1). */
#define PK_VERDICTS 4096
#define VERDICT_PLAIN 4 /* verdict flag: no back edge in the loop's code but its own last one */
#define VERDICT_SELF 8  /* verdict flag: its iterations are self-contained (idle.c self_contained) */
#define PK_NATIVE_BPS 16 /* breakpoints the native verdict knows; more: Python decides */
/* Trusted loops (idle.c): slots, and the cycles an epoch of trust lasts: a loop that
 * made progress and then got stuck is noticed at most this many cycles (and a few of
 * its iterations) later than one never trusted. */
#define PK_TRUST 1024
#define PK_SH_BUF 4096 /* console bytes of semihosting kept natively until the run loop writes them */
#define PK_TRUST_CYCLES (1u << 20)

/* The NVIC's exception state: one record, owned by peripherals/nvic.py (NvicState),
 * read and pended here without a Python call. */

typedef struct {
    uint64_t pending;   /* bit e: exception number e is pending */
    uint64_t active;    /* bit e: exception number e is active */
    uint32_t enabled;   /* bit n: IRQn enabled */
    uint32_t irqs;
    int32_t prio[64];   /* priority by exception number: NMI -2, HardFault -1 */
} pk_nvic;

typedef struct {
    /* counters (read by Python) */
    uint64_t cycles;
    uint64_t insns;
    uint64_t deadline;
    uint64_t blocks;
    /* the block currently executing, not yet committed */
    uint32_t cur_valid, cur_start, cur_end, cur_cost, cur_insns, cur_flags;
    /* the last committed block, for the sequential-fetch rule */
    uint32_t prev_valid, prev_end, prev_flags;
    /* why the hook stopped the run */
    uint32_t stop_reason;
    uint32_t align_pc, align_addr;
    uint32_t align_skip_start;  /* a block start whose alignment and UNDEFINED checks are skipped once */
    /* flash wait states for the block-start fetch rule */
    uint32_t fetch_ws, flash_base, flash_end;
    uint32_t cond_penalty;
    uint32_t align_enabled;
    /* callbacks into Unicorn and Python */
    void *uc;
    pk_reg_read_fn reg_read;
    pk_emu_stop_fn emu_stop;
    int32_t regids[16];
    uint32_t ring[RING];        /* recent block starts; empty slots 0xFFFFFFFF (the report's "way there") */
    uint8_t ring_pos;           /* byte offset of the next slot: wraps by itself (engine patch 18) */
    uint8_t ring_pad[3];
    int32_t apsr_regid;
    uint32_t pad_end;
    /* ---- the native exception model (excmodel.c) ---- */
    pk_nvic *nvic;
    pk_reg_write_fn reg_write;
    pk_mem_read_fn mem_read;
    pk_mem_write_fn mem_write;
    pk_py_intr_fn py_intr;      /* Python serves the INTR cases the native path does not */
    uint64_t sleep_cycles;      /* cycles asleep (WFI, WFE, sleep-on-exit), native and Python */
    uint64_t taken[64];         /* exceptions taken natively, by number */
    uint32_t native_on;         /* 0 while stepping: every event goes through Python */
    uint32_t irq_check;         /* the NVIC state changed: look for an exception to take */
    uint32_t vtor;              /* vector table base in force */
    uint32_t sleep_on_exit;     /* SCR.SLEEPONEXIT */
    uint32_t entry_cycles, return_cycles;
    uint32_t stack_n;           /* memory an exception frame may be stacked to */
    uint32_t stack_base[8], stack_end[8];
    int32_t id_primask, id_control, id_msp, id_psp, id_xpsr, id_ipsr;
    uint32_t wfi_pc;            /* STOP_SLEEP: the WFI or WFE the core stopped at */
    /* native device models with timed events, in the order they fire at one cycle */
    pk_device devices[PK_DEVICES];
    uint32_t n_devices;
    uint32_t pad_devices;
    /* peripheral access timing: which access of the current block is being served */
    uint64_t acc_blocks;
    uint32_t acc_start;
    int32_t acc_last;
    /* idle loops (idle.c): a block that branches to itself and can change nothing */
    uint64_t py_next;           /* Python's next clock event, PK_NO_EVENT if none */
    uint64_t py_reads;          /* device reads served by Python (may change by themselves) */
    uint64_t loop_py_reads;
    uint64_t dev_events;        /* device events fired (native or Python): device state changed */
    uint64_t loop_dev_events;
    uint64_t loop_since;        /* cycle count when the current self-loop began */
    uint32_t loop_start, loop_count, loop_have;
    uint32_t loop_end;          /* a loop of several blocks: its code is [loop_start, loop_end) */
    uint32_t loop_regs[16];
    uint32_t verdict_addr[PK_VERDICTS]; /* which loops may be fast-forwarded: decided once by Python */
    uint32_t verdict_end[PK_VERDICTS];  /* ... and the end of the code each verdict covers */
    uint8_t verdict[PK_VERDICTS];       /* 0 unknown, 1 may (loads and arithmetic only), 2 may not */
    uint16_t verdict_regs[PK_VERDICTS]; /* registers the loop's code names (bit 15: APSR), the
                                         * only ones its iterations compare; 0: all 16 */
    /* the observation API (observe.c): non-NULL while something observes; the native
     * paths report what they do through pk_obs_emit() (observe.h) */
    void *obs;
    /* ---- code decoding and caching (codecache.c, thumb.c): code anywhere ---- */
    pk_code *code;              /* per-block cache, decoded from guest memory on first execution */
    uint32_t undef_pc;          /* STOP_UNDEF: the first instruction of the block ARMv6-M lacks */
    uint32_t watch_region;      /* STOP_WATCH: the writable region whose write watch must grow */
    uint32_t native_error;      /* STOP_NATIVE_ERROR: PK_NOMEM or PK_UNREADABLE */
    uint32_t pad_code;
    /* idle loops of several blocks (idle.c): one iteration so far, and the verdict key */
    uint32_t loop_acc_cost, loop_acc_insns, loop_acc_blocks;
    uint32_t loop_key;          /* verdict_addr of the loop being checked: start, or start | 1 */
    uint64_t native_min;        /* no native device event before this cycle (0: look again) */
    /* ---- the engine's TLB (tlb.c) ---- */
    uint32_t tlb_page;          /* bytes per engine TLB page */
    uint32_t pad_tlb;
    /* ---- idle loops (idle.c) ---- */
    uint32_t loop_misses;       /* iterations in a row whose registers differed */
    uint32_t loop_anchor;       /* a loop of several blocks: where its iterations are compared
                                 * (its start, or where it was entered through a fall-through) */
    /* ---- counted mode (pkasim's engine, docs/engine.md): the generated code commits
     * each block and records the next one itself; pk_block_hook_counted runs only
     * at a block start where cycles >= limit, or where the block asks for it ---- */
    uint64_t limit;             /* 0: the next block start calls the hook */
    uint64_t limit_inline;      /* limit, or 0 while a span is set: the quick test of the blocks
                                 * that need no other (engine patch 19; pk_counted_relimit keeps it) */
    uint32_t span_lo, span_hi;  /* a loop decided not idle: its blocks need no hook */
    uint32_t counted;           /* the engine keeps the accounting (else pk_block_hook) */
    uint32_t cur_mode;          /* the current block's code cache mode (counted mode) */
    /* a block split by the alignment checks (STOP_ALIGN_SPLIT, STOP_SP_WRITE) goes on
     * here: no deadline stop or exception before this rest of it, as the whole block
     * had none */
    uint32_t split_start;
    uint32_t pad_split;
    /* ---- loop verdicts decided natively (idle.c pk_native_verdict): set by the run
     * loop before each run (runloop.py RunLoop._sync_native_verdicts) ---- */
    uint32_t verdict_native;    /* 1: a loop of 16-bit code may be decided here, without a stop */
    uint32_t until_on, until;   /* the run's 'until' address (a loop holding it must run) */
    uint32_t bp_n;              /* breakpoints (a loop holding one must run) */
    uint32_t bp[PK_NATIVE_BPS];
    /* ---- pkasim's engine (patch 14): the CPU's r0-r15, read in place (NULL: through
     * reg_read); r0-r14 there are what reg_read returns inside a hook ---- */
    uint32_t *regs_ptr;
    /* ---- trusted loops (idle.c): loops decided to make progress skip the idle check
     * until the epoch ends at trust_end (then every loop is checked again) ---- */
    uint64_t trust_end;
    uint32_t trust[PK_TRUST];   /* by slot: the tag of the loop trusted there, or 0 */
    /* ---- flash data reads through an alias (flashalias.c; the stock wheel with wait
     * states): the TLB sends data reads of flash to an MMIO window at flash_alias ---- */
    const uint8_t *flash_host;  /* the memory behind flash */
    uint64_t flash_alias;       /* the window's base (above 4 GiB) */
    uint32_t flash_alias_on;    /* 1: data reads of flash go through the window */
    uint32_t pad_alias;
    /* ---- watched pages behind a window (watchwindow.c; the stock wheel) ---- */
    void *wwin;                 /* pk_wwin, or NULL */
    /* ---- semihosting console output (excmodel.c): SYS_WRITEC and SYS_WRITE0 go to
     * sh_buf without a stop while sh_native; the run loop writes it out after each run
     * (runloop.py RunLoop.emu), before anything else reaches the console ---- */
    uint32_t sh_native;         /* 1: the run loop allows it (a plain run, no debugger) */
    uint32_t sh_len;            /* bytes in sh_buf */
    char sh_buf[PK_SH_BUF];
    /* ---- pkasim's engine (patch 25): exception entry and return set xPSR, CONTROL,
     * MSP, PSP and PC in one call (one hflags rebuild); NULL: register by register ---- */
    pk_mexc_fn m_read, m_write;
    /* ---- idle loops (idle.c): a whole iteration of the loop being followed, from its
     * start, seen block by block (a loop whose verdict says VERDICT_SELF is skipped after
     * one); the run loop sets whole_next to PK_NONE before each run ---- */
    uint64_t whole_py_reads;    /* py_reads when it began */
    uint64_t whole_dev_events;  /* dev_events when it began */
    uint64_t py_read_at;        /* cycles when the last device read served by Python was made
                                 * (the count at the start of the block that made it) */
    uint32_t whole_next;        /* where its next block starts; PK_NONE: none being seen */
    uint32_t whole_anchored;    /* 1: it came to loop_anchor since it began (the sums of a loop
                                 * of several blocks restart there) */
    /* ---- one function call measured within a run, without a stop (core/measure.py;
     * cyclehook.c probe_mark): the first start of the block at probe_at records the
     * count there, in PROBE_ENTRY the function's entry (then the address LR holds there
     * is awaited: PROBE_CALL), in PROBE_CALL its return (PROBE_DONE). A call whose
     * return cannot be awaited so stops the run at the entry (PROBE_STOPPED, STOP_PROBE).
     * In counted mode the awaited block is translated to call the hook (pk_block_cost) ---- */
    uint32_t probe_state;       /* PROBE_OFF, PROBE_ENTRY, PROBE_CALL, PROBE_DONE, PROBE_STOPPED */
    uint32_t probe_at;          /* the block start awaited; PK_NONE: none */
    uint64_t probe_cycles[2];   /* the count at the entry and at the return */
    uint64_t probe_insns[2];
    pk_probe_fn probe_py;       /* called at each mark (NULL: none) */
    pk_uc_ctl_fn uc_ctl;        /* drops the return's translation (counted mode) */
    uint32_t ctl_remove_cache;  /* uc_ctl's control word for UC_CTL_TB_REMOVE_CACHE */
    uint32_t pad_probe;
} pk_state;

/* The block about to run, as the idle check sees it (cyclehook.c block_start): its
 * end, and the cycles and instructions it takes when it runs to its end and on (the
 * fetch of its first word when it is not entered sequentially; its B<cond>, if it ends
 * in one, not taken). end 0: not known. */
typedef struct {
    uint32_t end, cost, insns;
} pk_upcoming;

#define PK_NO_EVENT UINT64_MAX

/* The device interface of a register window served in C: Unicorn's uc_cb_mmio_read_t
 * and uc_cb_mmio_write_t with the device's state record, and the call through which a
 * fast path hands an access back to the device's Python model (bus.py's slow path:
 * offset in the window, size, value, 1 for a write, the access's cycle offset in its
 * block). */
typedef uint64_t (*pk_mmio_read_fn)(void *uc, uint64_t offset, unsigned size, void *state);
typedef void (*pk_mmio_write_fn)(void *uc, uint64_t offset, unsigned size, uint64_t value, void *state);
typedef uint32_t (*pk_py_access_fn)(uint32_t offset, uint32_t size, uint32_t value, uint32_t write,
                                    uint32_t time_offset);

/* state.c: what all of the native core shares */
PK_INTERNAL uint32_t pk_reg_cached(pk_state *s, int r, uint32_t *cache, uint32_t *have);
void pk_commit_block(pk_state *s);
/* The executing block's record is dropped (not valid): its cost and instructions go
 * to 0 as well, since the engine's generated code adds them without testing
 * cur_valid (docs/engine.md, counted mode). */
static inline void pk_drop_block(pk_state *s) {
    s->cur_valid = 0;
    s->cur_cost = 0;
    s->cur_insns = 0;
}

/* A block start into the ring of recent ones (as the engine's generated code does). */
static inline void pk_ring_note(pk_state *s, uint32_t a) {
    s->ring[s->ring_pos / 4] = a;
    s->ring_pos = (uint8_t)(s->ring_pos + 4);
}
uint32_t pk_access_offset(pk_state *s, uint32_t addr);
uint32_t pk_cost_before(pk_state *s, uint32_t stop, uint32_t *insns);
int pk_code_changed(pk_state *s, uint32_t addr, uint32_t len);
int pk_next_to_take(const pk_nvic *n, int primask);
int pk_would_wake(const pk_nvic *n);
int pk_mem_read(pk_state *s, uint32_t addr, void *out, uint32_t n);
void pk_pend(pk_state *s, uint32_t exc);
uint64_t pk_native_next(pk_state *s);
void pk_native_due(pk_state *s);
void pk_native_changed(pk_state *s);
/* excmodel.c */
int pk_take(pk_state *s, int exc, uint32_t return_pc);
/* cyclehook.c, counted mode */
void pk_counted_wake(pk_state *s);
void pk_counted_soon(pk_state *s, uint64_t at);
void pk_counted_relimit(pk_state *s);
/* cyclehook.c: the call probe (Machine.probe_call) */
void pk_probe_arm(pk_state *s, uint32_t entry);
/* flashalias.c: the TLB entry of a flash page, when data reads go through the alias */
int pk_flash_alias_fill(pk_state *s, uint32_t page, int type, uint64_t *paddr, uint32_t *perms);
/* watchwindow.c: the TLB entry of a watched page, when it lies behind the window */
int pk_wwin_fill(pk_state *s, uint32_t page, int type, uint64_t *paddr, uint32_t *perms);
/* idle.c */
void pk_verdicts_forget(pk_state *s, uint32_t lo, uint32_t hi);
int pk_idle_relevant(pk_state *s, uint32_t start, uint32_t end, uint32_t *tag);
uint32_t pk_trust_tag(uint32_t t, uint32_t end);
void pk_trust_grant(pk_state *s, uint32_t t, uint32_t end);
uint32_t *pk_trust_gate(pk_state *s, uint32_t tag);
void pk_trust_expire(pk_state *s);
/* Whether the loop with this tag is trusted now (tag 0: no loop, never). */
static inline int pk_trusted(const pk_state *s, uint32_t tag) {
    return tag != 0 && s->trust[(tag >> 1) & (PK_TRUST - 1)] == tag;
}
int pk_idle_loop(pk_state *s, uint32_t start, uint32_t end, uint32_t cost, uint32_t insns);
void pk_idle_enter(pk_state *s, uint32_t done_start, uint32_t done_end, uint32_t a, uint32_t cost,
                   const pk_upcoming *up);
int pk_idle_track(pk_state *s, uint32_t done_start, uint32_t done_end, uint32_t next, uint32_t cost,
                  uint32_t insns, const pk_upcoming *up);


#endif
