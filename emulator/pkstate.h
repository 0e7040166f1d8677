/*
 * pkasim's native state: what the cycle hook (cyclehook.c), the native exception
 * model (excmodel.c) and the native device fast paths (peripherals/pka_fast.c) share.
 * emulator/native.py mirrors pk_state field by field (load() checks the size).
 */
#ifndef PKSTATE_H
#define PKSTATE_H
#include <stddef.h>
#include <stdint.h>

#include "observe.h"

#define PK_F_COND 0x01    /* conditional branch: cost in the table is the taken cost */
#define PK_F_BRANCH 0x02  /* changes the flow: the next fetch is not sequential */
#define PK_F_IRQCHK 0x04  /* may unmask interrupts (CPSIE, MSR): re-check at next block */
#define PK_F_CONDNEXT 0x08 /* B<cond> whose target is its own fall-through address */
/* bits 7:4 of a flags entry hold the condition code of a B<cond> */

enum { K_NONE = 0, K_CLOBBER, K_CONST, K_ADDI, K_ADDR, K_ACCESS };

enum { STOP_NONE = 0, STOP_DEADLINE = 1, STOP_ALIGN = 2, STOP_IRQCHK = 3, STOP_SLEEP = 4, STOP_LOOPCHK = 5,
       STOP_STUCK = 6 };

#define RING 32

/* What Python tells about the instruction that starts at one halfword. */
typedef struct {
    uint8_t kind;  /* K_* above: how the instruction moves an address register */
    int8_t rd;     /* register written (K_CONST/K_ADDI/K_ADDR) */
    int8_t rn;     /* base register (K_ADDI/K_ADDR/K_ACCESS) */
    int8_t rm;     /* index register or -1 (K_ADDR/K_ACCESS) */
    int32_t imm;   /* constant, added immediate or access offset */
    uint16_t wmask;/* registers the instruction writes (applied after its access) */
    uint8_t amask; /* K_ACCESS: alignment mask (1 halfword, 3 word) */
    uint8_t pad;
} pk_desc;

typedef struct {
    int8_t a, b;   /* registers summed into the address, -1 for none */
    uint8_t mask;
    uint8_t pad;
    int32_t off;
    uint32_t pc;   /* address of the accessing instruction */
} pk_check;

typedef struct {
    uint32_t size;   /* block size in bytes, 0 = not cached yet */
    uint32_t cost;
    uint32_t insns;
    uint32_t check_first;
    uint16_t check_n;
    uint8_t last_flags;
    uint8_t uncheckable; /* 1 if an access address could not be resolved at entry */
} pk_block;

typedef uint64_t (*pk_fallback_fn)(uint64_t address, uint32_t size);
typedef int (*pk_reg_read_fn)(void *uc, int regid, void *value);
typedef int (*pk_emu_stop_fn)(void *uc);
typedef int (*pk_reg_write_fn)(void *uc, int regid, const void *value);
typedef int (*pk_mem_read_fn)(void *uc, uint64_t address, void *bytes, size_t size);
typedef int (*pk_mem_write_fn)(void *uc, uint64_t address, const void *bytes, size_t size);
typedef void (*pk_py_intr_fn)(uint32_t intno);

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
    uint32_t align_pc, align_addr, align_skip_start;
    /* tables over [code_base, code_base + 2*code_halfwords) */
    uint32_t code_base, code_halfwords;
    const uint8_t *cost;
    const uint8_t *len;
    const uint8_t *flags;
    const pk_desc *desc;
    pk_block *cache;
    pk_check *checks;
    uint32_t checks_used, checks_cap;
    /* flash wait states for the block-start fetch rule */
    uint32_t fetch_ws, flash_base, flash_end;
    uint32_t cond_penalty;
    uint32_t align_enabled;
    /* callbacks into Unicorn and Python */
    void *uc;
    pk_reg_read_fn reg_read;
    pk_emu_stop_fn emu_stop;
    pk_fallback_fn fallback;
    int32_t regids[16];
    uint32_t ring[RING];
    uint32_t ring_pos;
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
    /* native device models (their next event and their handler) */
    void *pka;                  /* pk_pka (peripherals/pka_fast.c), or NULL */
    /* peripheral access timing: which access of the current block is being served */
    uint64_t acc_blocks;
    uint32_t acc_start;
    int32_t acc_last;
    /* idle loops (idle.c): a block that branches to itself and can change nothing */
    uint64_t py_next;           /* Python's next clock event, PK_NO_EVENT if none */
    uint64_t py_reads;          /* device reads served by Python (may change by themselves) */
    uint64_t loop_py_reads;
    uint64_t loop_since;        /* cycle count when the current self-loop began */
    uint32_t loop_start, loop_count, loop_have, loop_pad;
    uint32_t loop_regs[16];
    uint32_t verdict_addr[256]; /* which blocks may be fast-forwarded: decided once by Python */
    uint8_t verdict[256];       /* 0 unknown, 1 may (loads and arithmetic only), 2 may not */
    /* the observation API (observe.c): non-NULL while something observes; the native
     * paths report what they do through pk_obs_emit() (observe.h) */
    void *obs;
} pk_state;

#define PK_NO_EVENT UINT64_MAX

/* cyclehook.c */
uint32_t pk_access_offset(pk_state *s, uint32_t addr);
void pk_commit_block(pk_state *s);
/* excmodel.c */
int pk_next_to_take(const pk_nvic *n, int primask);
int pk_would_wake(const pk_nvic *n);
void pk_pend(pk_state *s, uint32_t exc);
uint64_t pk_native_next(pk_state *s);
void pk_native_due(pk_state *s);
int pk_take(pk_state *s, int exc, uint32_t return_pc);
/* idle.c */
int pk_idle_loop(pk_state *s, uint32_t start, uint32_t cost, uint32_t insns);
/* pka_fast.c */
uint64_t pk_pka_next(void *pka);
void pk_pka_finish(void *pka);


#endif
