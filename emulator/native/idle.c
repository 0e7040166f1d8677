/*
 * Idle loops, fast-forwarded: a firmware spinning in `b .`, or polling a flag or a
 * device register that cannot change before the next event, runs to that event in
 * one step, its cycles exact in whole iterations, as WFI sleeps.
 *
 * A loop qualifies when (1) it is one block that branches back to its own start, or
 * a few blocks within a short span of code [start, end) entered at start, the last
 * of which branches back to start (a poll the compiler unrolled:
 * `ldr; tst; beq out` four times, then `bne start`), (2) Python has checked its code
 * once (runloop.py RunLoop._loop_verdict: loads, arithmetic, compares and branches
 * only; no store, call, system instruction or breakpoint), (3) the registers (r0-r12,
 * SP, LR, APSR; only APSR and those the loop's code names, when Python's verdict lists
 * them: no iteration touches another) at the start of two consecutive iterations are
 * identical, (4) no
 * device read in between was served by Python (a Python device may change by itself,
 * SysTick's CVR does; the native PKA's registers hold until its next event), and (5)
 * no device event fired in between (in a loop of several blocks the event may fall
 * after the iteration's read of the device: the registers then still hold the value
 * read before it, though the device has changed). Then
 * every further iteration is the same until an event (a device event, an interrupt,
 * the budget). A one-block loop takes the count past the next event at once (k
 * iterations of c cycles), where the event fires at the block boundary as it would
 * have. A loop of several blocks skips only the iterations that end before the next
 * event, and the one in which the event falls runs as usual: the event may end it in
 * any of its blocks. With no event ahead at all the firmware is stuck: the run stops
 * (STOP_STUCK) instead of burning the cycle budget.
 *
 * A self-contained loop is skipped one iteration sooner, without comparing registers.
 * Its verdict says so (VERDICT_SELF, made with the others: self_contained below,
 * cycles.loop_self_contained in Python) when its code [start, end) is straight-line
 * (16-bit instructions; every branch but the last leaves [start, end), forward or back,
 * and the last goes back to start: an iteration that comes round to start runs every
 * instruction of [start, end) in order) and every register it writes, APSR's N, Z, C
 * and V counted apart, is written before it is read in that order (C of a shift by a
 * register, kept when the amount is 0, is no write). What such an iteration computes
 * depends only on memory, the devices and the registers the code never writes, none of
 * which changes without (4) a device read served by Python or (5) a device event: every
 * iteration after one that ran whole from start with neither does the same. So at the
 * first arrival at start after such a whole iteration it is skipped exactly as by (3)
 * (the same k iterations of the same cycles). "Whole" is seen block by block
 * (whole_next): from an entry at start, from a back edge to start, or from a block that
 * ran the loop's first instructions and fell through into the rest (the compiler puts
 * `str CR; ldr SR; tst; beq` in one block: pk_idle_enter), when no read served by Python
 * was made while that block ran (it may have been the loop's own); the blocks that
 * follow must each start where the one before ended, up to the back edge. A stop of the
 * run, an exception, a jump into the loop's middle or any other block in between breaks
 * it: the partial iteration does not count. With no event ahead, the comparison of
 * registers decides, so a stuck loop is reported where it was before.
 */
#include <string.h>

#include "pkstate.h"

/* A loop of several blocks: at most this many bytes of code and blocks an iteration. */
#define MULTI_SPAN 64u
#define MULTI_BLOCKS 8u
/* Iterations of a several-block loop compared before it is taken for one that makes
 * progress (a counter) and left alone until it is left. */
#define MULTI_TRIES 8u

/* Iterations in a row whose registers differed before a loop is taken for one that
 * makes progress (a counter, a pointer walking a buffer) and no longer compared until
 * it is left. Only speed depends on it: a loop compared longer would be fast-forwarded
 * to the same counts. */
#define MISS_LIMIT 2u

static int verdict(pk_state *s, uint32_t key, uint32_t end) {
    uint32_t i = (key >> 1) & (PK_VERDICTS - 1);
    if (s->verdict_addr[i] != key || s->verdict_end[i] != end) return 0;
    return s->verdict[i] & 3;
}

/* The loop whose code is [start, end) is decided: not skipped until it is left. In
 * counted mode its blocks then run without the hook while they stay inside its code,
 * if no other loop hides in it (whose back edge the hook would have to see: the
 * verdict says, VERDICT_PLAIN, from Python's reading of the code). */
static void decided(pk_state *s, uint32_t key, uint32_t end) {
    uint32_t i = (key >> 1) & (PK_VERDICTS - 1);
    s->loop_have = 2;
    if (s->cur_mode != 2) return; /* (only a loop of blocks the idle check follows) */
    if (s->verdict_addr[i] != key || s->verdict_end[i] != end || !(s->verdict[i] & VERDICT_PLAIN)) return;
    s->span_lo = key & ~1u;
    s->span_hi = end;
}

/* ------------------------------------------------------------------ trusted loops
 *
 * A loop decided to make progress is remembered until the trust epoch ends (every
 * PK_TRUST_CYCLES cycles, pk_trust_expire): its blocks then skip the idle check, on
 * both engines alike, and in counted mode they run without the hook (the engine tests
 * the block's gate word, trust[slot] == tag, in the generated code). Only speed and
 * the moment a stuck loop is noticed depend on it: a loop emulated instead of
 * fast-forwarded ends at the same counts, and a loop stuck while trusted is checked
 * again within PK_TRUST_CYCLES cycles and a few iterations. */

/* The tag of the loop whose code is [t, end): nonzero; its slot is trust_slot(tag). */
uint32_t pk_trust_tag(uint32_t t, uint32_t end) {
    uint32_t h = ((t & ~1u) >> 1) * 0x9E3779B1u ^ (end - (t & ~1u)) * 0x85EBCA77u;
    h ^= h >> 15;
    return h | 1u;
}

static uint32_t trust_slot(uint32_t tag) { return (tag >> 1) & (PK_TRUST - 1); } /* (as pk_trusted) */

void pk_trust_grant(pk_state *s, uint32_t t, uint32_t end) {
    uint32_t tag = pk_trust_tag(t, end);
    s->trust[trust_slot(tag)] = tag;
}

uint32_t *pk_trust_gate(pk_state *s, uint32_t tag) { return &s->trust[trust_slot(tag)]; }

/* The epoch ended (or the count was set back): no loop is trusted, and the loop being
 * followed is followed afresh (a loop decided earlier in this entry is checked again:
 * this is what notices a loop that made progress and then got stuck). */
void pk_trust_expire(pk_state *s) {
    memset(s->trust, 0, sizeof s->trust);
    s->trust_end = s->cycles + PK_TRUST_CYCLES;
    s->loop_start = 0xFFFFFFFFu;
    s->loop_end = 0;
    s->loop_have = 0;
    s->whole_next = PK_NONE;
    s->span_lo = 0xFFFFFFFFu;
    s->span_hi = 0;
}

/* ------------------------------------------------------------------ native verdicts */

#define NATIVE_VERDICT_MAX 1024u /* bytes of loop code decided here; longer: Python */

/* cycles.py idle_ok16, line for line: the 16-bit instructions capstone reads as one an
 * idle loop may hold (tests/test_cycle_model.py holds both equal to capstone). */
static int idle_ok_exact(uint32_t hw) {
    if (hw < 0x4700 || (hw >= 0x4800 && hw < 0x5000) || (hw >= 0x9800 && hw < 0xB100)) return 1;
    if (hw >= 0x5000 && hw < 0x9800) return hw < 0x6000 ? hw >= 0x5600 : (hw & 0x0800) != 0;
    if ((hw >> 8) == 0xB2 || hw == 0xBF00 || (hw >= 0xBA00 && hw < 0xBB00 && (hw & 0xC0) != 0x80)) return 1;
    if (hw >= 0xC800 && hw < 0xD000) return (hw & 0xFF) != 0;
    return (hw >= 0xD000 && hw < 0xDE00) || (hw >= 0xE000 && hw < 0xE800);
}

/* cycles.py _named16: r0-r14 an idle loop's instruction names in a register field. */
static uint32_t named16(uint32_t hw) {
    uint32_t lo3 = 1u << (hw & 7) | 1u << (hw >> 3 & 7);
    if (hw < 0x2000 || (hw >= 0x5000 && hw < 0x6000)) return lo3 | 1u << (hw >> 6 & 7);
    if (hw < 0x4000 || (hw >= 0x4800 && hw < 0x5000)) return 1u << (hw >> 8 & 7);
    if (hw < 0x4400 || (hw >= 0x6000 && hw < 0x9000) || (hw >> 8) == 0xB2 || (hw >> 8) == 0xBA) return lo3;
    if (hw < 0x4700) return (1u << ((hw & 7) | (hw >> 4 & 8)) | 1u << (hw >> 3 & 0xF)) & 0x7FFFu;
    if (hw >= 0x9800 && hw < 0xB000) return 1u << (hw >> 8 & 7) | 1u << 13;
    if (hw >= 0xB000 && hw < 0xB100) return 1u << 13;
    if (hw >= 0xC800 && hw < 0xD000) return 1u << (hw >> 8 & 7) | (hw & 0xFF);
    return 0;
}


/* APSR's flags as register bits beside r0-r14 (self_contained). */
#define F_N (1u << 16)
#define F_Z (1u << 17)
#define F_C (1u << 18)
#define F_V (1u << 19)
#define F_NZ (F_N | F_Z)
#define F_NZCV (F_N | F_Z | F_C | F_V)

/* cycles.py _uses16, line for line: what a 16-bit instruction of an idle loop reads,
 * always writes and may write (*maybe: C of a shift by a register, kept when the
 * amount is 0); r0-r14 as bits 0-14, N Z C V as bits 16-19, PC (a constant) not
 * counted. 0 for one that writes PC, stores or is not an idle loop's. */
static int uses16(uint32_t hw, uint32_t *reads, uint32_t *always, uint32_t *maybe) {
    static const uint32_t cond_reads[14] = {F_Z, F_Z, F_C, F_C, F_N, F_N, F_V, F_V, F_C | F_Z, F_C | F_Z,
                                            F_N | F_V, F_N | F_V, F_Z | F_N | F_V, F_Z | F_N | F_V};
    uint32_t lo = hw & 7, mid = hw >> 3 & 7, top = hw >> 6 & 7, rd8 = 1u << (hw >> 8 & 7);
    *maybe = 0;
    if (hw < 0x1800) { /* lsls lsrs asrs rd, rm, #imm (lsls #0 is movs: C kept) */
        *reads = 1u << mid;
        *always = 1u << lo | F_NZ | (hw < 0x0800 && (hw >> 6 & 0x1F) == 0 ? 0 : F_C);
    } else if (hw < 0x1C00) { /* adds subs rd, rn, rm */
        *reads = 1u << mid | 1u << top;
        *always = 1u << lo | F_NZCV;
    } else if (hw < 0x2000) { /* adds subs rd, rn, #imm3 */
        *reads = 1u << mid;
        *always = 1u << lo | F_NZCV;
    } else if (hw < 0x2800) { /* movs rd, #imm8 */
        *reads = 0;
        *always = rd8 | F_NZ;
    } else if (hw < 0x3000) { /* cmp rn, #imm8 */
        *reads = rd8;
        *always = F_NZCV;
    } else if (hw < 0x4000) { /* adds subs rdn, #imm8 */
        *reads = rd8;
        *always = rd8 | F_NZCV;
    } else if (hw < 0x4400) { /* the ALU operations, rdn and rm */
        uint32_t op = hw >> 6 & 0xF, both = 1u << lo | 1u << mid;
        *reads = both;
        *always = 1u << lo | F_NZ;
        if (op == 2 || op == 3 || op == 4 || op == 7) { /* lsls lsrs asrs rors by a register */
            *maybe = F_C;
        } else if (op == 5 || op == 6) { /* adcs sbcs */
            *reads = both | F_C;
            *always = 1u << lo | F_NZCV;
        } else if (op == 8) { /* tst */
            *always = F_NZ;
        } else if (op == 9) { /* rsbs rd, rn, #0 */
            *reads = 1u << mid;
            *always = 1u << lo | F_NZCV;
        } else if (op == 10 || op == 11) { /* cmp cmn */
            *always = F_NZCV;
        } else if (op == 15) { /* mvns */
            *reads = 1u << mid;
        } /* else ands eors orrs muls bics (muls keeps C and V on ARMv6-M) */
    } else if (hw < 0x4700) { /* add cmp mov with high registers */
        uint32_t op = hw >> 8 & 3, rdn = 1u << ((hw & 7) | (hw >> 4 & 8)), rm = 1u << (hw >> 3 & 0xF);
        if (op != 1 && rdn == 1u << 15) return 0; /* writes PC: a branch */
        *reads = (op == 2 ? rm : rdn | rm) & 0x7FFFu;
        *always = op == 1 ? F_NZCV : rdn;
    } else if ((hw >= 0x4800 && hw < 0x5000) || (hw >= 0xA000 && hw < 0xA800)) { /* ldr rt, [pc, #]; adr */
        *reads = 0;
        *always = rd8;
    } else if (hw >= 0x5600 && hw < 0x6000) { /* loads, register offset */
        *reads = 1u << mid | 1u << top;
        *always = 1u << lo;
    } else if (hw >= 0x6000 && hw < 0x9000 && (hw & 0x0800)) { /* loads, immediate offset */
        *reads = 1u << mid;
        *always = 1u << lo;
    } else if ((hw >= 0x9800 && hw < 0xA000) || (hw >= 0xA800 && hw < 0xB000)) { /* ldr [sp]; add rd, sp */
        *reads = 1u << 13;
        *always = rd8;
    } else if (hw >= 0xB000 && hw < 0xB100) { /* add sub sp, # */
        *reads = *always = 1u << 13;
    } else if ((hw >> 8) == 0xB2 || (hw >= 0xBA00 && hw < 0xBB00 && (hw & 0xC0) != 0x80)) { /* extends, rev */
        *reads = 1u << mid;
        *always = 1u << lo;
    } else if (hw == 0xBF00) { /* nop */
        *reads = *always = 0;
    } else if (hw >= 0xC800 && hw < 0xD000 && (hw & 0xFF)) { /* ldm rn!, {list} */
        *reads = rd8;
        *always = (hw & 0xFF) | (rd8 & hw ? 0 : rd8);
    } else if (hw >= 0xD000 && hw < 0xDE00) { /* b<cond> */
        *reads = cond_reads[hw >> 8 & 0xF];
        *always = 0;
    } else if (hw >= 0xE000 && hw < 0xE800) { /* b */
        *reads = *always = 0;
    } else {
        return 0;
    }
    return 1;
}

static uint32_t branch_target(uint32_t hw, uint32_t at, int *is); /* (counted mode, below) */

/* cycles.py loop_self_contained, line for line: whether every iteration of the loop
 * whose code is the n halfwords hw[] (from its start round to its start) does what
 * the one before it did, whatever the registers were when it began. Its code is
 * straight-line (16-bit; a branch before the last only out of the code, forward or
 * back, the last one back to the start: an iteration that comes round runs all of it
 * in order) and every register or flag (N, Z, C, V apart) it writes is written before
 * it is read. VERDICT_SELF: skipped after one whole iteration (iteration(), below). */
static int self_contained(const uint16_t *hw, uint32_t n) {
    uint32_t written = 0, done = 0, reads, always, maybe;
    int is;
    if (n == 0 || branch_target(hw[n - 1], 2 * (n - 1), &is) != 0 || !is) return 0;
    for (uint32_t i = 0; i < n; i++) {
        if (hw[i] >> 11 >= 0x1D || !uses16(hw[i], &reads, &always, &maybe)) return 0;
        written |= always | maybe;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t to = branch_target(hw[i], 2 * i, &is); /* (before the start: above 2^31) */
        if (i + 1 < n && is && to < 2 * n) return 0; /* a branch within the loop's code */
        uses16(hw[i], &reads, &always, &maybe);
        if (reads & written & ~done) return 0; /* read before this iteration wrote it */
        done |= always;
    }
    return 1;
}

/* For tests: self_contained on n halfwords (tests/test_idle_self.py holds it equal to
 * cycles.loop_self_contained). */
int pk_self_contained(const uint16_t *hw, uint32_t n) { return n <= NATIVE_VERDICT_MAX / 2 && self_contained(hw, n); }

/* The run loop's verdict on the loop whose code is [start, end) (runloop.py
 * RunLoop._loop_verdict and _plain_loop, cycles.loop_can_idle and loop_registers),
 * made here when the run loop allows it (no read watchpoint, no instruction hook, a few
 * breakpoints, all listed) and the code is 16-bit instructions only: the same entry in
 * the table, without stopping the run. Returns 0 when Python must decide. */
static int native_verdict(pk_state *s, uint32_t key, uint32_t end) {
    uint32_t start = key & ~1u;
    uint16_t hw[NATIVE_VERDICT_MAX / 2];
    if (!s->verdict_native || end <= start || end - start > NATIVE_VERDICT_MAX || (end - start) % 2) return 0;
    uint32_t n = (end - start) / 2;
    if (pk_mem_read(s, start, hw, 2 * n) != 0) return 0;
    int ok = !(s->until_on && start <= s->until && s->until < end);
    for (uint32_t i = 0; i < s->bp_n && i < PK_NATIVE_BPS; i++)
        if (start <= s->bp[i] && s->bp[i] < end) ok = 0;
    uint32_t regs = 0x8000u; /* APSR */
    int plain = 1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t h = hw[i];
        if (h >> 11 >= 0x1D) return 0; /* a 32-bit instruction: capstone's reading, in Python */
        if (!idle_ok_exact(h)) ok = 0;
        regs |= named16(h);
        int32_t off = 0, is = 0;
        if ((h & 0xF000) == 0xD000 && (h & 0x0F00) < 0x0E00) {
            off = (int32_t)(int8_t)(h & 0xFF);
            is = 1;
        } else if ((h & 0xF800) == 0xE000) {
            off = (int32_t)((h & 0x7FF) << 21) >> 21;
            is = 1;
        }
        if (is && 4 + 2 * off <= 0 && i + 1 != n) plain = 0; /* a branch back inside: not plain */
    }
    uint32_t i = (key >> 1) & (PK_VERDICTS - 1);
    s->verdict_addr[i] = key;
    s->verdict_end[i] = end;
    s->verdict[i] = (uint8_t)((ok ? 1 : 2) | (plain ? VERDICT_PLAIN : 0) | (ok && self_contained(hw, n) ? VERDICT_SELF : 0));
    s->verdict_regs[i] = (uint16_t)(ok ? regs : 0);
    return 1;
}

/* Forget the verdicts on loops whose code overlaps [lo, hi) (a breakpoint came or went
 * there): they are decided again when next seen. */
void pk_verdicts_forget(pk_state *s, uint32_t lo, uint32_t hi) {
    for (uint32_t i = 0; i < PK_VERDICTS; i++) {
        uint32_t key = s->verdict_addr[i];
        if (key != 0xFFFFFFFFu && (key & ~1u) < hi && lo < s->verdict_end[i]) {
            s->verdict_addr[i] = 0xFFFFFFFFu;
            s->verdict[i] = 0;
        }
    }
}

/* The registers the loop's verdict names (all when it names none), read now. Returns
 * 1 if any differs from loop_regs, which then hold the new values. */
static int regs_changed(pk_state *s, uint32_t key) {
    uint32_t regs = s->verdict_regs[(key >> 1) & (PK_VERDICTS - 1)];
    int changed = 0;
    if (!regs) regs = 0xFFFFu;
    for (int r = 0; r < 16; r++) {
        uint32_t v32 = 0;
        if (!(regs >> r & 1)) continue; /* not named by the loop's code: no iteration touches it */
        if (r < 15 && s->regs_ptr) v32 = s->regs_ptr[r]; /* in place (pkasim's engine) */
        else s->reg_read(s->uc, r == 15 ? s->apsr_regid : s->regids[r], &v32);
        if (v32 != s->loop_regs[r]) {
            changed = 1;
            s->loop_regs[r] = v32;
        }
    }
    return changed;
}

/* A whole iteration of the loop being followed begins: its first block starts at
 * ``at`` now (or the iteration began inside the block just run, which ran on to
 * ``at``: pk_idle_enter). The device reads served by Python and the device events so
 * far are noted: a VERDICT_SELF loop is skipped when it comes round with neither. */
static void whole_begin(pk_state *s, uint32_t at) {
    s->whole_next = at;
    s->whole_anchored = at == s->loop_anchor;
    s->whole_py_reads = s->py_reads;
    s->whole_dev_events = s->dev_events;
}

/* The verdict byte (with its flags) on the loop [key & ~1, end), or 0 when unknown. */
static uint32_t verdict_flags(pk_state *s, uint32_t key, uint32_t end) {
    uint32_t i = (key >> 1) & (PK_VERDICTS - 1);
    return s->verdict_addr[i] == key && s->verdict_end[i] == end ? s->verdict[i] : 0;
}

/* Whether the whole iteration just seen (whole: its blocks followed one after the
 * other from the loop's start round to it) lets a loop whose verdict is ``v`` be
 * skipped without comparing registers: its iterations are self-contained
 * (VERDICT_SELF), no device read was served by Python and no device event fired since
 * it began, and some event lies ahead (with none, the loop is reported stuck where the
 * comparison of registers would report it). */
static int whole_same(pk_state *s, int whole, uint32_t v, uint64_t *native) {
    if (!whole || (v & 3) != 1 || !(v & VERDICT_SELF)) return 0;
    if (s->py_reads != s->whole_py_reads || s->dev_events != s->whole_dev_events) return 0;
    *native = pk_native_next(s);
    return *native != PK_NO_EVENT || s->py_next != PK_NO_EVENT;
}

/* Every further iteration (cost cycles, insns instructions, blocks blocks) is the same
 * as the one just seen until the next event (``native``: pk_native_next): go there in
 * whole iterations (a loop of one block past it, so that it fires at that block
 * boundary; a loop of several blocks up to it, the iteration in which it falls run as
 * usual). Returns 1 when the engine was stopped: no event ahead at all, the loop is
 * stuck. */
static int skip(pk_state *s, uint64_t native, uint64_t cost, uint64_t insns, uint64_t blocks, int multi) {
    if (native == PK_NO_EVENT && s->py_next == PK_NO_EVENT) {
        s->stop_reason = STOP_STUCK;
        s->emu_stop(s->uc);
        return 1;
    }
    uint64_t next = native < s->deadline ? native : s->deadline;
    if (next != PK_NO_EVENT && next > s->cycles) {
        uint64_t k = multi ? (next - s->cycles) / cost : (next - s->cycles + cost - 1) / cost;
        if (k) {
            if (s->obs) pk_obs_emit(s->obs, PK_EV_SPIN, s->cycles, 0, k * cost);
            s->cycles += k * cost;
            s->insns += k * insns;
            s->blocks += k * blocks;
        }
    }
    return 0;
}

/* One more iteration of the loop at start ended (cost cycles, insns instructions,
 * blocks blocks). Returns 1 when the engine was stopped. The registers (r0-r12, SP,
 * LR, APSR) are compared with those at the iteration before; MISS_LIMIT differing
 * iterations in a row decide the loop. ``whole``: this iteration ran whole from the
 * loop's start (whole_next), so a VERDICT_SELF loop needs no comparison (whole_same). */
static int iteration(pk_state *s, uint32_t key, uint32_t end, uint64_t cost, uint64_t insns, uint64_t blocks,
                     int multi, int whole) {
    if (s->loop_have == 2) return 0; /* decided: this loop is not skipped */
    if (pk_trusted(s, pk_trust_tag(key & ~1u, end))) {
        /* Trusted: its blocks are not followed (cyclehook.c), so what was summed for
         * this iteration may miss some of them; decided, as when it was trusted. */
        decided(s, key, end);
        return 0;
    }
    /* The first iteration is compared only when the loop's verdict is known: a first
     * encounter asks Python (a stop) only for a loop that came round twice. */
    if (++s->loop_count < 2 && !verdict(s, key, end)) return 0;
    if (multi && s->loop_count > MULTI_TRIES) {
        decided(s, key, end);
        return 0;
    }
    int v = verdict(s, key, end);
    if (v == 0 && native_verdict(s, key, end)) v = verdict(s, key, end);
    if (v == 0) {
        s->loop_key = key;
        s->stop_reason = STOP_LOOPCHK;
        s->emu_stop(s->uc);
        return 1;
    }
    if (v != 1 || cost == 0) {
        decided(s, key, end);
        return 0;
    }
    int same = s->loop_have && s->py_reads == s->loop_py_reads && s->dev_events == s->loop_dev_events;
    uint64_t native = PK_NO_EVENT;
    if (regs_changed(s, key)) same = 0; /* (noted either way: the next iteration is compared with them) */
    if (same) native = pk_native_next(s);
    else if (whole_same(s, whole, verdict_flags(s, key, end), &native)) same = 1;
    if (same) {
        s->loop_misses = 0;
        if (skip(s, native, cost, insns, blocks, multi)) return 1;
    } else if (s->loop_have && ++s->loop_misses >= MISS_LIMIT) {
        decided(s, key, end);
        pk_trust_grant(s, key & ~1u, end);
        return 0;
    }
    s->loop_have = 1;
    s->loop_py_reads = s->py_reads;
    s->loop_dev_events = s->dev_events;
    return 0;
}

/* Called at the start of a block that just ran to its own start again. Returns 1
 * when the engine was stopped (Python must decide, or the loop is stuck). */
int pk_idle_loop(pk_state *s, uint32_t start, uint32_t end, uint32_t cost, uint32_t insns) {
    /* whole: pk_idle_enter noted where this block began (a loop of one block, known) */
    int whole = s->whole_next == start && s->loop_start == start && s->loop_end == 0;
    if (s->loop_start != start || s->loop_end != 0) {
        s->loop_start = start;
        s->loop_end = 0;
        s->loop_count = 0;
        s->loop_have = 0;
        s->loop_misses = 0;
        s->loop_since = s->cycles - cost;
    }
    int stopped = iteration(s, start, end, cost, insns, 1, 0, whole);
    whole_begin(s, start); /* the next iteration: this block again */
    return stopped;
}

/* Called after the block [done_start, done_end) (cost cycles, insns instructions)
 * ran and the block at next (``up``) is about to: follows loops of several blocks.
 * Returns 1 when the engine was stopped. */
int pk_idle_track(pk_state *s, uint32_t done_start, uint32_t done_end, uint32_t next, uint32_t cost,
                  uint32_t insns, const pk_upcoming *up) {
    if (next < done_start && done_end - next <= MULTI_SPAN) {
        /* A branch back: the end of an iteration of [next, done_end), or a new loop. */
        if (s->loop_start == next && s->loop_end == done_end) {
            int whole = s->whole_next == done_start; /* its blocks one after the other from next */
            if (s->loop_anchor != next) {
                if (s->loop_acc_blocks + 1 < MULTI_BLOCKS || s->loop_have == 2) {
                    /* compared where it was entered: on round to there */
                    s->loop_acc_cost += cost;
                    s->loop_acc_insns += insns;
                    s->loop_acc_blocks += 1;
                    /* A whole iteration from next ran: the block about to run, up to
                     * the anchor, and those summed since, are each further one. */
                    uint64_t native = PK_NO_EVENT;
                    if (up->end == s->loop_anchor && s->whole_anchored && s->loop_have != 2 &&
                        !pk_trusted(s, pk_trust_tag(next, done_end)) &&
                        whole_same(s, whole, verdict_flags(s, next | 1u, done_end), &native)) {
                        if (skip(s, native, (uint64_t)s->loop_acc_cost + up->cost,
                                 (uint64_t)s->loop_acc_insns + up->insns, (uint64_t)s->loop_acc_blocks + 1, 1))
                            return 1;
                        /* Compared at its start from now on, as a loop entered there (its
                         * iterations from there are the ones skipped): the skip is not
                         * looked at again where it was entered, one block on. */
                        s->loop_anchor = next;
                        s->loop_count = 1;
                        s->loop_have = 0;
                        s->loop_acc_cost = s->loop_acc_insns = s->loop_acc_blocks = 0;
                    }
                    whole_begin(s, next);
                    return 0;
                }
                s->loop_anchor = next; /* not back there within MULTI_BLOCKS: compared here, afresh */
                s->loop_count = 0;
                s->loop_have = 0;
                s->loop_acc_cost = s->loop_acc_insns = s->loop_acc_blocks = 0;
                whole_begin(s, next);
                return 0;
            }
            uint64_t c = (uint64_t)s->loop_acc_cost + cost, n = (uint64_t)s->loop_acc_insns + insns;
            uint64_t b = (uint64_t)s->loop_acc_blocks + 1;
            s->loop_acc_cost = s->loop_acc_insns = s->loop_acc_blocks = 0;
            int stopped = iteration(s, next | 1u, done_end, c, n, b, 1, whole);
            whole_begin(s, next);
            return stopped;
        }
        s->loop_start = next;
        s->loop_anchor = next;
        s->loop_end = done_end;
        s->loop_count = 0;
        s->loop_have = 0;
        s->loop_misses = 0;
        s->loop_since = s->cycles;
        s->loop_acc_cost = s->loop_acc_insns = s->loop_acc_blocks = 0;
        whole_begin(s, next);
        return 0;
    }
    if (s->loop_end != 0 && done_start >= s->loop_start && done_end <= s->loop_end && next > done_start &&
        next < s->loop_end && (s->loop_acc_blocks + 1 < MULTI_BLOCKS || s->loop_have == 2)) {
        /* On within the loop's code. */
        s->whole_next = s->whole_next == done_start && next == done_end ? next : PK_NONE;
        if (next == s->loop_anchor) s->whole_anchored = 1; /* (the sums restart here, below) */
        s->loop_acc_cost += cost;
        s->loop_acc_insns += insns;
        s->loop_acc_blocks += 1;
        if (next == s->loop_anchor && next != s->loop_start) {
            /* Round again to where it was entered: an iteration, as at a back edge. */
            uint64_t c = s->loop_acc_cost, n = s->loop_acc_insns, b = s->loop_acc_blocks;
            s->loop_acc_cost = s->loop_acc_insns = s->loop_acc_blocks = 0;
            return iteration(s, s->loop_start | 1u, s->loop_end, c, n, b, 1, 0);
        }
        return 0;
    }
    pk_idle_enter(s, done_start, done_end, next, cost, up); /* left it: a known loop may begin here */
    return 0;
}

/* The block at ``a`` (``up``) is about to run, entered from outside any loop being
 * followed, after the block [done_start, done_end) (cost cycles): when a loop of
 * several blocks whose verdict (made at an earlier entry) lets it idle starts at
 * ``a``, or inside the block before that fell through into ``a`` (a compiler puts the
 * loop's first instructions after the code before it, in one block), follow that loop
 * from this entry with ``a`` as its anchor: its registers noted here, and compared each
 * time it comes round to ``a`` (pk_idle_track). A poll entered again (once per PKA
 * operation, say) is then skipped after one round, to the same counts (which rounds
 * are compared changes only how soon it is skipped). Its whole iteration from its
 * start is seen from here too (whole_begin): entered at its start, or through a block
 * that ran its first instructions (from the loop's start on to ``a``, in order) with no
 * device read served by Python while it ran (one might have been the loop's own, in
 * those instructions; a device event fires only between blocks). A loop of one block
 * at ``a`` with a VERDICT_SELF verdict is followed from here as well, for the same. */
void pk_idle_enter(pk_state *s, uint32_t done_start, uint32_t done_end, uint32_t a, uint32_t cost,
                   const pk_upcoming *up) {
    s->loop_start = 0xFFFFFFFFu;
    s->loop_end = 0;
    s->whole_next = PK_NONE;
    uint32_t t = done_start < a && a == done_end && a - done_start <= MULTI_SPAN ? done_start + 2 : a;
    for (; t <= a; t += 2) {
        uint32_t key = t | 1u, i = (key >> 1) & (PK_VERDICTS - 1);
        if (s->verdict_addr[i] != key || (s->verdict[i] & 3) != 1) continue;
        uint32_t end = s->verdict_end[i];
        if (a >= end || end - t > MULTI_SPAN) continue;
        s->loop_start = t;
        s->loop_anchor = a;
        s->loop_end = end;
        s->loop_count = 1;
        s->loop_misses = 0;
        s->loop_since = s->cycles;
        s->loop_acc_cost = s->loop_acc_insns = s->loop_acc_blocks = 0;
        /* The registers here are those the loop comes round to (its code is all there
         * is between two visits of ``a``): the first iteration is compared with them. */
        regs_changed(s, key);
        s->loop_have = 1;
        s->loop_py_reads = s->py_reads;
        s->loop_dev_events = s->dev_events;
        /* (the block before ran from cycles - cost: a read served by Python since then
         * may have been made in it) */
        if (t == a || s->py_reads == 0 || (s->cycles >= cost && s->py_read_at < s->cycles - cost))
            whole_begin(s, a);
        return;
    }
    uint32_t v = verdict_flags(s, a, up->end);
    if (up->end && (v & 3) == 1 && (v & VERDICT_SELF)) {
        /* A loop of one block (pk_idle_loop), as it would be when it comes round. */
        s->loop_start = a;
        s->loop_count = 0;
        s->loop_have = 0;
        s->loop_misses = 0;
        s->loop_since = s->cycles;
        whole_begin(s, a);
    }
}

/* ------------------------------------------------------------------ counted mode */

/* Whether a Thumb halfword is an instruction the run loop's verdict lets an idle loop
 * hold (core/cycles.py _IDLE_OK: loads, arithmetic, compares, branches), or one this
 * table cannot tell apart from one (it may say yes to more, never to less). */
static int idle_ok(uint32_t hw) {
    if (hw < 0x4400) return 1;                          /* shifts, add/sub, mov/cmp imm, ALU */
    if (hw < 0x4700) return 1;                          /* add/cmp/mov high registers */
    if (hw < 0x4800) return 0;                          /* bx, blx */
    if (hw < 0x5000) return 1;                          /* ldr literal */
    if (hw < 0x6000) return ((hw >> 9) & 7) >= 3;       /* register offset: loads only */
    if (hw < 0xA000) return (hw >> 11) & 1;             /* immediate offset: loads only */
    if (hw < 0xB000) return 1;                          /* adr, add rd, sp */
    if (hw < 0xB100) return 1;                          /* add/sub sp */
    if ((hw & 0xFF00) == 0xB200) return 1;              /* sxth sxtb uxth uxtb */
    if ((hw & 0xFF00) == 0xBA00) return (hw & 0xC0) != 0x80; /* rev rev16 revsh */
    if (hw == 0xBF00) return 1;                         /* nop */
    if (hw < 0xC000) return 0;
    if (hw < 0xD000) return (hw >> 11) & 1;             /* ldm, not stm */
    if (hw < 0xDE00) return 1;                          /* b<cond> */
    if (hw < 0xE000) return 0;                          /* udf, svc */
    if (hw < 0xE800) return 1;                          /* b */
    return 0;                                           /* 32-bit */
}

/* A direct branch (B, B<cond>) at ``at``: its target, else 0 and *is = 0. */
static uint32_t branch_target(uint32_t hw, uint32_t at, int *is) {
    *is = 1;
    if ((hw & 0xF000) == 0xD000 && (hw & 0x0F00) < 0x0E00) return at + 4 + (uint32_t)((int32_t)(int8_t)(hw & 0xFF) * 2);
    if ((hw & 0xF800) == 0xE000) return at + 4 + (uint32_t)(((int32_t)((hw & 0x7FF) << 21) >> 21) * 2);
    *is = 0;
    return 0;
}

#define REL_BEFORE MULTI_SPAN
#define REL_MAX 1024u

/* Whether the loop [t, b + 2) (all 16-bit instructions, read into hw[] from lo) can
 * never be idle: some register is written by exactly one of its instructions, an
 * ADDS/SUBS/ADD of a nonzero constant to itself, and no branch inside the loop goes
 * past that instruction (so every iteration the idle check compares, back edge to
 * back edge through the loop's own code, runs it once: the register differs at
 * every back edge, and the check would never skip the loop or report it stuck). */
static int progresses(const uint16_t *hw, uint32_t lo, uint32_t t, uint32_t b) {
    static const pk_rules rules = {1, 0, 0, 0};
    uint8_t writers[16] = {0};
    uint32_t reach = t; /* the furthest target of a branch inside the loop, at or below b */
    pk_insn in;
    for (uint32_t at = t; at <= b; at += 2) {
        uint32_t h = hw[(at - lo) / 2];
        int is;
        uint32_t to = branch_target(h, at, &is);
        if (is && to > reach && to <= b) reach = to;
        pk_decode(at, h, 0, &rules, &in);
        for (int r = 0; r < 15; r++)
            if (in.desc.wmask >> r & 1 && writers[r] < 2) writers[r]++;
    }
    for (uint32_t at = reach; at < b; at += 2) {
        pk_decode(at, hw[(at - lo) / 2], 0, &rules, &in);
        const pk_desc *d = &in.desc;
        if (d->kind == K_ADDI && d->rd == d->rn && d->imm != 0 && d->rd >= 0 && d->rd < 15 && writers[d->rd] == 1)
            return 1;
    }
    return 0;
}

/* Whether the block [start, end) lies in the code of a loop the idle check can follow
 * and fast-forward (idle.c above): a direct branch back at some b, to t <= start,
 * with end <= b + 2, over at most MULTI_SPAN bytes (or to start itself from the
 * block's own end), all of [t, b + 2) instructions an idle loop may hold. Counted
 * mode calls the hook at every start of such a block, so the idle check sees what it
 * sees on the stock engine; any other block the generated code runs alone. A loop that
 * can never be idle (progresses(), above) does not count. Decided once per cached
 * block, at translation. *tag: the trust tag of the loop when the block lies in
 * exactly one such loop (its gate, above), else 0. */
int pk_idle_relevant(pk_state *s, uint32_t start, uint32_t end, uint32_t *tag) {
    uint16_t hw[(REL_BEFORE + REL_MAX + MULTI_SPAN + 8) / 2];
    uint8_t have[sizeof hw / 2];
    uint32_t loops = 0;
    *tag = 0;
    if (end <= start || end - start > REL_MAX) return 0;
    uint32_t lo = start >= REL_BEFORE ? start - REL_BEFORE : 0;
    uint32_t hi = end > start + MULTI_SPAN ? end : start + MULTI_SPAN;
    hi += 4;
    uint32_t n = (hi - lo) / 2;
    if (pk_mem_read(s, lo, hw, 2 * n) == 0) {
        memset(have, 1, n); /* one read for the whole span (each halfword's read is a memory-map lookup) */
    } else {
        for (uint32_t i = 0; i < n; i++) have[i] = pk_mem_read(s, lo + 2 * i, &hw[i], 2) == 0;
    }
#define HW(addr) (hw[((addr) - lo) / 2])
#define HAVE(addr) ((addr) >= lo && (addr) + 2 <= hi && have[((addr) - lo) / 2])
    for (uint32_t b = start; b + 2 <= hi && HAVE(b);) {
        uint32_t h = HW(b);
        if (h >> 11 >= 0x1D) {
            b += 4;
            continue;
        }
        int is;
        uint32_t t = branch_target(h, b, &is);
        if (is && t <= start && end <= b + 2 && (b + 2 - t <= MULTI_SPAN || (t == start && b + 2 == end))) {
            int ok = 1;
            for (uint32_t at = t; at < b + 2; at += 2) {
                if (!HAVE(at) || !idle_ok(HW(at))) {
                    ok = 0;
                    break;
                }
            }
            if (ok && !progresses(hw, lo, t, b) && ++loops == 1) *tag = pk_trust_tag(t, b + 2);
        }
        if (b + 2 > start + MULTI_SPAN && b + 2 >= end) break;
        b += 2;
    }
    if (loops != 1) *tag = 0; /* in several loops: gated by none (the hook at every start) */
    return loops != 0;
#undef HW
#undef HAVE
}
