/*
 * pkasim's native exception model: the common path of emulator/core/exceptions.py and of
 * the run loop's sleep, without a Python call.
 *
 * A firmware that waits for a peripheral in WFI and takes its interrupt costs, per
 * operation, one exception entry, one return and one sleep. In Python each costs
 * tens of microseconds and an engine restart; here they cost well under one. Every
 * function below mirrors a Python method line for line and gives up (returns -1,
 * or stops the engine) on anything unusual, so that Python serves it exactly as
 * before: a fault while stacking, a vector without the Thumb bit, an exception
 * return that sleeps on exit, a device event owned by Python.
 *
 *   pk_take                          exceptions.py ExceptionModel.take (ARMv6-M B1.5.6)
 *   pk_return (pk_intr_hook)         exceptions.py ExceptionModel.exception_return (B1.5.8)
 *   pk_wfi_hook                      runloop.py RunLoop._sleep_until (B1.5.17)
 *
 * On pkasim's engine entry and return read the special registers (xPSR, CONTROL, MSP,
 * PSP, PC) in one call and write the state after them in one (engine patch 25: one
 * rebuild of the translation flags, no uc_reg_write per register); on the stock wheel
 * they go register by register, in the order that places SP right.
 *
 * tests/test_native_core.py runs every firmware image both ways (native_on = 0 sends
 * everything through Python) and checks identical cycles, instructions and results.
 */
#include "pkstate.h"

#define NMI 2
#define HARDFAULT 3
#define EXC_RETURN_HANDLER 0xFFFFFFF1u
#define EXC_RETURN_THREAD_MSP 0xFFFFFFF9u
#define EXC_RETURN_THREAD_PSP 0xFFFFFFFDu

static uint32_t rd(pk_state *s, int regid) {
    uint32_t v = 0;
    s->reg_read(s->uc, regid, &v);
    return v;
}

static void wr(pk_state *s, int regid, uint32_t v) {
    s->reg_write(s->uc, regid, &v);
}

/* r0-r12 and LR (r14): in place on pkasim's engine (patch 14; what reg_read and
 * reg_write reach for these, from a hook), else through Unicorn. SP and PC always
 * through Unicorn (an SP write is masked, a PC write ends the block). */
static uint32_t rd_core(pk_state *s, int r) {
    if (s->regs_ptr && r != 13 && r < 15) return s->regs_ptr[r];
    return rd(s, s->regids[r]);
}

static void wr_core(pk_state *s, int r, uint32_t v) {
    if (s->regs_ptr && r != 13 && r < 15) s->regs_ptr[r] = v;
    else wr(s, s->regids[r], v);
}

/* ------------------------------------------------------------------ entry and return */

static int stackable(const pk_state *s, uint32_t addr, uint32_t n) {
    for (uint32_t i = 0; i < s->stack_n; i++)
        if (addr >= s->stack_base[i] && addr + n <= s->stack_end[i] && addr + n >= addr) return 1;
    return 0;
}

/* The exception frame: r0-r3, r12, LR, the return address and xPSR (its bit 9: the
 * stack was realigned). */
static void frame_of(pk_state *s, uint32_t frame[8], uint32_t return_pc, uint32_t xpsr, uint32_t realign) {
    frame[0] = rd_core(s, 0);
    frame[1] = rd_core(s, 1);
    frame[2] = rd_core(s, 2);
    frame[3] = rd_core(s, 3);
    frame[4] = rd_core(s, 12);
    frame[5] = rd_core(s, 14);
    frame[6] = return_pc & ~1u;
    frame[7] = (xpsr & ~(1u << 9)) | (realign ? 1u << 9 : 0) | (1u << 24);
}

/* What entry does after the registers are set, PC last; shared by both paths. */
static void entered(pk_state *s, int exc, uint32_t vector) {
    s->nvic->pending &= ~((uint64_t)1 << exc);
    s->nvic->active |= (uint64_t)1 << exc;
    s->taken[exc] += 1;
    if (s->obs) pk_obs_emit(s->obs, PK_EV_EXC_ENTRY, s->cycles, (uint32_t)exc, vector);
    s->cycles += s->entry_cycles;
    s->prev_valid = 0;
}

/* Exception entry on pkasim's engine (patch 25): the special registers read in one
 * call and the state after the entry (IPSR, CONTROL.SPSEL clear, the stacked SP, PC
 * at the vector) written in one, with one rebuild of the translation flags: the
 * same state the register-by-register path below leaves. */
static int take_m(pk_state *s, int exc, uint32_t return_pc) {
    pk_mexc m;
    uint32_t vector = 0, frame[8];
    if (s->m_read(s->uc, &m) != 0) return -1;
    int thread = (m.xpsr & 0x3F) == 0;
    int use_psp = thread && (m.control & 2);
    uint32_t sp = use_psp ? m.psp : m.msp;
    uint32_t realign = sp & 4;
    uint32_t frame_sp = sp - 32 - (realign ? 4 : 0);
    if (!stackable(s, frame_sp, 32)) return -1;
    if (pk_mem_read(s, s->vtor + 4u * (uint32_t)exc, &vector, 4) != 0 || !(vector & 1)) return -1;
    frame_of(s, frame, return_pc, m.xpsr, realign);
    s->mem_write(s->uc, frame_sp, frame, 32);
    pk_code_changed(s, frame_sp, 32); /* a frame stacked over cached code makes it stale */
    if (use_psp) m.psp = frame_sp;
    else m.msp = frame_sp;
    m.control &= ~2u;
    m.xpsr = (m.xpsr & ~0x1FFu) | (uint32_t)exc;
    m.pc = vector | 1;
    wr_core(s, 14, !thread ? EXC_RETURN_HANDLER : (use_psp ? EXC_RETURN_THREAD_PSP : EXC_RETURN_THREAD_MSP));
    entered(s, exc, vector);
    s->m_write(s->uc, &m); /* last: the engine restarts at the vector */
    return 0;
}

/* Exception entry; -1 (nothing changed) when Python must do it and report a fault. */
int pk_take(pk_state *s, int exc, uint32_t return_pc) {
    if (s->m_write) return take_m(s, exc, return_pc);
    uint32_t current = rd(s, s->id_ipsr) & 0x3F;
    int thread = current == 0;
    uint32_t control = rd(s, s->id_control);
    int use_psp = thread && (control & 2);
    uint32_t sp = rd(s, use_psp ? s->id_psp : s->id_msp);
    uint32_t xpsr = rd(s, s->id_xpsr);
    uint32_t realign = sp & 4;
    uint32_t frame_sp = sp - 32 - (realign ? 4 : 0);
    uint32_t vector = 0, frame[8], exc_return;
    if (!stackable(s, frame_sp, 32)) return -1;
    if (pk_mem_read(s, s->vtor + 4u * (uint32_t)exc, &vector, 4) != 0 || !(vector & 1)) return -1;
    frame_of(s, frame, return_pc, xpsr, realign);
    s->mem_write(s->uc, frame_sp, frame, 32);
    pk_code_changed(s, frame_sp, 32); /* a frame stacked over cached code makes it stale */
    wr(s, use_psp ? s->id_psp : s->id_msp, frame_sp);
    exc_return = !thread ? EXC_RETURN_HANDLER : (use_psp ? EXC_RETURN_THREAD_PSP : EXC_RETURN_THREAD_MSP);
    wr(s, s->id_control, control & ~2u);
    wr(s, s->id_ipsr, (uint32_t)exc);
    wr(s, s->regids[13], rd(s, s->id_msp));
    wr_core(s, 14, exc_return);
    entered(s, exc, vector);
    wr(s, s->regids[15], vector | 1); /* last: the engine restarts at the vector */
    return 0;
}

/* An exception may have become takeable, and no instruction runs before the next
 * block boundary: when one is takeable, the hook takes it there (irq_check); when
 * none is, the check the hook would make there finds nothing, so it is made now and
 * counted mode's limit is set as the hook would set it, with no hook call there. */
static void irq_check_now(pk_state *s, uint32_t primask) {
    if (pk_next_to_take(s->nvic, (int)(primask & 1)) >= 0) {
        s->irq_check = 1;
        pk_counted_wake(s);
    } else {
        s->irq_check = 0;
        pk_counted_relimit(s);
    }
}

/* The frame's r0-r3, r12 and LR back, and what a return does besides the registers;
 * shared by both paths. */
static void returned(pk_state *s, const uint32_t w[8], uint32_t current) {
    wr_core(s, 0, w[0]);
    wr_core(s, 1, w[1]);
    wr_core(s, 2, w[2]);
    wr_core(s, 3, w[3]);
    wr_core(s, 12, w[4]);
    wr_core(s, 14, w[5]);
    s->cycles += s->return_cycles;
    if (s->obs) pk_obs_emit(s->obs, PK_EV_EXC_RETURN, s->cycles, current, 0);
    s->prev_valid = 0;
}

/* Whether a return with this EXC_RETURN from exception `current` can be done here,
 * from the frame at sp (read into w); 0 when Python must do it. */
static int returnable(pk_state *s, uint32_t exc_return, uint32_t current, uint32_t sp, uint32_t w[8]) {
    int to_thread = exc_return != EXC_RETURN_HANDLER;
    if (!stackable(s, sp, 32) || pk_mem_read(s, sp, w, 32) != 0) return 0;
    if (to_thread && (w[7] & 0x3F)) return 0;         /* Python logs the odd frame */
    if (to_thread && s->sleep_on_exit && !(s->nvic->active & ~((uint64_t)1 << current)))
        return 0;                                     /* sleep-on-exit: Python sleeps */
    return 1;
}

static int exc_return_known(uint32_t exc_return, uint32_t current) {
    return (exc_return == EXC_RETURN_HANDLER || exc_return == EXC_RETURN_THREAD_MSP ||
            exc_return == EXC_RETURN_THREAD_PSP) && current != 0;
}

/* Exception return on pkasim's engine (patch 25), from the registers read at the
 * hook (m): the state after it (xPSR from the frame, CONTROL.SPSEL, the unstacked
 * SP, PC at the return address) written in one call, as take_m. */
static int return_m(pk_state *s, pk_mexc *m, uint32_t exc_return) {
    uint32_t current = m->xpsr & 0x3F, w[8];
    if (!exc_return_known(exc_return, current)) return -1;
    int to_thread = exc_return != EXC_RETURN_HANDLER;
    int use_psp = exc_return == EXC_RETURN_THREAD_PSP;
    uint32_t sp = use_psp ? m->psp : m->msp;
    if (!returnable(s, exc_return, current, sp, w)) return -1;
    s->nvic->active &= ~((uint64_t)1 << current);
    uint32_t new_sp = sp + 32 + ((w[7] & (1u << 9)) ? 4 : 0);
    if (use_psp) m->psp = new_sp;
    else m->msp = new_sp;
    m->xpsr = (w[7] & 0xF0000000u) | (1u << 24) | (to_thread ? 0 : (w[7] & 0x3F));
    m->control = use_psp ? (m->control | 2u) : (m->control & ~2u);
    m->pc = w[6] | 1;
    returned(s, w, current);
    irq_check_now(s, m->primask); /* tail-chaining: the next block boundary takes what is takeable */
    s->m_write(s->uc, m); /* last: the engine goes on at the return address */
    return 0;
}

/* Exception return; -1 (nothing changed) when Python must do it. */
static int pk_return(pk_state *s, uint32_t exc_return) {
    uint32_t current = rd(s, s->id_ipsr) & 0x3F;
    uint32_t w[8], sp, new_sp, ipsr, control;
    int to_thread, use_psp;
    if (!exc_return_known(exc_return, current)) return -1;
    to_thread = exc_return != EXC_RETURN_HANDLER;
    use_psp = exc_return == EXC_RETURN_THREAD_PSP;
    sp = rd(s, use_psp ? s->id_psp : s->id_msp);
    if (!returnable(s, exc_return, current, sp, w)) return -1;
    s->nvic->active &= ~((uint64_t)1 << current);
    new_sp = sp + 32 + ((w[7] & (1u << 9)) ? 4 : 0);
    wr(s, use_psp ? s->id_psp : s->id_msp, new_sp);
    ipsr = to_thread ? 0 : (w[7] & 0x3F);
    wr(s, s->id_xpsr, (w[7] & 0xF0000000u) | (1u << 24) | ipsr);
    control = rd(s, s->id_control);
    wr(s, s->id_ipsr, ipsr);
    wr(s, s->id_control, use_psp ? (control | 2u) : (control & ~2u));
    wr(s, s->regids[13], new_sp);
    returned(s, w, current);
    irq_check_now(s, rd(s, s->id_primask)); /* tail-chaining: the next block boundary takes what is takeable */
    wr(s, s->regids[15], w[6] | 1);
    return 0;
}

#define SYS_WRITEC 0x03
#define SYS_WRITE0 0x04
#define SH_CHUNK 64u

/* Semihosting's console output, SYS_WRITEC and SYS_WRITE0 (BKPT 0xAB at pc), kept in
 * sh_buf without leaving the engine: the run loop writes it out when the run stops,
 * before anything else reaches the console. The same work as runloop.py's path (the
 * block settled up to the BKPT as settle.py does, the BKPT's cycle, r0 = 0, PC past
 * it); -1, with nothing changed, for anything else, a string that does not fit or
 * cannot be read, or a block that is not the one recorded: Python does it. */
static int native_semihost(pk_state *s, uint32_t pc) {
    uint16_t hw = 0;
    if (!s->sh_native || !s->cur_valid || pc < s->cur_start || pc >= s->cur_end) return -1;
    if (pk_mem_read(s, pc, &hw, 2) != 0 || hw != 0xBEAB) return -1;
    uint32_t op = rd_core(s, 0), arg = rd_core(s, 1), n = 0, room = PK_SH_BUF - s->sh_len;
    char *out = s->sh_buf + s->sh_len;
    if (op == SYS_WRITEC) {
        if (room < 1 || pk_mem_read(s, arg, out, 1) != 0) return -1;
        n = 1;
    } else if (op == SYS_WRITE0) {
        for (;;) {
            char chunk[SH_CHUNK];
            uint32_t k = SH_CHUNK, i;
            while (k && pk_mem_read(s, arg + n, chunk, k) != 0) k /= 2; /* near the end of a region */
            if (!k) return -1;
            for (i = 0; i < k && chunk[i]; i++) {
                if (n == room) return -1;
                out[n++] = chunk[i];
            }
            if (i < k) break;
        }
    } else {
        return -1;
    }
    /* settle.py Settler.settle, PC inside the recorded block */
    uint32_t start = s->cur_start, end = s->cur_end, insns = 0, whole_insns = 0;
    uint32_t cost = pk_cost_before(s, pc, &insns);
    if (s->fetch_ws && (start & 2) && start >= s->flash_base && start < s->flash_end &&
        s->cur_cost - pk_cost_before(s, end, &whole_insns) == s->fetch_ws)
        cost += s->fetch_ws; /* the fetch the block paid on entry */
    s->cycles += cost;
    s->insns += insns;
    s->blocks += 1;
    pk_drop_block(s);
    s->cycles += 1; /* BKPT: 1 cycle (table 3-1); the host call takes no modeled time */
    s->insns += 1;
    s->sh_len += n;
    s->prev_valid = 0; /* (settle.py's record of the block, then runloop.py's) */
    s->prev_end = pc;
    s->prev_flags = 0;
    pk_counted_wake(s);
    wr_core(s, 0, 0);
    wr(s, s->regids[15], (pc + 2) | 1);
    return 0;
}

/* UC_HOOK_INTR: exception returns here, and semihosting's console output; everything
 * else (SVC, BKPT, aborts, the other semihosting calls) in Python. */
void pk_intr_hook(void *uc, uint32_t intno, pk_state *s) {
    (void)uc;
    if (intno == 8 && s->native_on) {
        pk_mexc m;
        if (s->m_read) {
            if (s->m_read(s->uc, &m) == 0) {
                pk_commit_block(s);
                if (return_m(s, &m, m.pc | 1) == 0) return;
            }
        } else {
            uint32_t pc = rd(s, s->regids[15]) | 1;
            pk_commit_block(s);
            if (pk_return(s, pc) == 0) return;
        }
    }
    if (intno == 7 && s->native_on && native_semihost(s, rd(s, s->regids[15]) & ~1u) == 0) return;
    s->py_intr(intno);
}

/* UC_HOOK_CODE on each WFI/WFE of the image, before it executes: sleep until the
 * next event natively when that event is a native device's; otherwise stop so the
 * run loop sleeps until its own. The block ending in the WFI is committed first
 * (the WFI ends its translation block, so it is the block's last instruction). */
void pk_wfi_hook(void *uc, uint64_t address, uint32_t size, pk_state *s) {
    (void)size;
    if (!s->native_on) return; /* the WFI halts the engine; the run loop sleeps */
    uint16_t hw = 0;
    if (pk_mem_read(s, (uint32_t)address, &hw, 2) != 0 || (hw != 0xBF30 && hw != 0xBF20))
        return; /* the code there was rewritten since the hook was placed */
    pk_commit_block(s);
    for (;;) {
        if (pk_would_wake(s->nvic)) {
            irq_check_now(s, rd(s, s->id_primask)); /* (PRIMASK may hold the exception back: then only woken) */
            wr(s, s->regids[15], (uint32_t)address + 2 + 1); /* WFI done: go on after it */
            return;
        }
        uint64_t next = pk_native_next(s);
        if (next == PK_NO_EVENT || next >= s->deadline) {
            s->stop_reason = STOP_SLEEP;
            s->wfi_pc = (uint32_t)address;
            s->emu_stop(uc);
            return;
        }
        if (next > s->cycles) {
            if (s->obs) pk_obs_emit(s->obs, PK_EV_SLEEP, s->cycles, 0, next - s->cycles);
            s->sleep_cycles += next - s->cycles;
            s->cycles = next;
        }
        pk_native_due(s);
    }
}
