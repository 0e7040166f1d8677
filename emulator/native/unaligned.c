/*
 * pkasim alignment programs (see unaligned.h).
 *
 * A program is a list of operations on numbered values. Values 0-15 are r0-r15 at
 * block entry, 16 the carry flag at block entry, 17 the constant 0; every operation
 * that yields a value yields a new one (so a value never changes). The builder follows
 * the block in program order, one ARMv6-M instruction at a time (ARMv6-M ARM DDI0419,
 * chapter A5/A6 semantics, integer and carry flag only: nothing in a block reads N, Z
 * or V before its last instruction), then keeps only what the checks need: the checks,
 * the values their addresses depend on, and, when such a value is loaded from memory,
 * every store before that load (it may write the loaded bytes).
 *
 * A check after a value not known before the block runs (a load from a peripheral or
 * from unmapped memory, a special register other than the stack pointers) stops the
 * block for the machine to split (PK_ALIGN_SPLIT).
 */
#include "unaligned.h"

#include <stdlib.h>
#include <string.h>

#define MAX_VALUES 1024 /* values of one cut-down program; more: split at its first check */
#define MAX_STORES 64   /* stores remembered while a program runs; more: later loads unknown */

#define SIGNED 0x80
#define SHAPE_LOAD_CHECK 1 /* A_HEAD size bit: the program is load_then_check's */
/* (A_HEAD size bit PK_SHAPE_QUICK, unaligned.h: the program is pk_align_quick's) */

/* What a register holds while the block is followed: value v plus the constant off.
 * Adding a constant, moving, PUSH/POP and LDM/STM write-back change off only, so the
 * addresses of a loop body unrolled over a pointer stay (entry register + constant)
 * and need no operation; constants are (V_ZERO, constant). */
typedef struct {
    uint16_t v;
    int32_t off;
} ref_t;

struct pk_abuild {
    pk_aop *ops;
    uint32_t n, cap;
    ref_t cur[16];  /* what each register holds now */
    uint16_t carry; /* the value the carry flag holds now */
    uint32_t next;  /* next new value */
    int sp_write;   /* SP is set from a register: the block needs a program */
    int failed;     /* out of memory */
};

pk_abuild *pk_abuild_new(void) { return calloc(1, sizeof(pk_abuild)); }

void pk_abuild_free(pk_abuild *b) {
    if (!b) return;
    free(b->ops);
    free(b);
}

void pk_abuild_start(pk_abuild *b) {
    b->n = 0;
    for (int r = 0; r < 16; r++) {
        b->cur[r].v = (uint16_t)r;
        b->cur[r].off = 0;
    }
    b->carry = V_CARRY;
    b->next = V_FIRST;
    b->sp_write = 0;
    b->failed = 0;
}

int pk_abuild_needed(const pk_abuild *b) { return b->sp_write; }

/* Append an operation; returns its value (or A_NONE when it yields none). */
static uint16_t emit(pk_abuild *b, uint8_t op, uint8_t size, uint16_t a, uint16_t bb, uint16_t c, int32_t imm,
                     uint32_t pc, int yields) {
    if (b->failed) return V_ZERO;
    if (b->n == b->cap) {
        uint32_t cap = b->cap ? b->cap * 2 : 256;
        pk_aop *n = realloc(b->ops, cap * sizeof(pk_aop));
        if (!n) {
            b->failed = 1;
            return V_ZERO;
        }
        b->ops = n;
        b->cap = cap;
    }
    if (yields && b->next >= A_NONE) {
        b->failed = 1; /* more values than an index holds: cannot happen in 512 instructions */
        return V_ZERO;
    }
    pk_aop *o = &b->ops[b->n++];
    o->op = op;
    o->size = size;
    o->a = a;
    o->b = bb;
    o->c = c;
    o->imm = imm;
    o->pc = pc;
    o->d = yields ? (uint16_t)b->next++ : A_NONE;
    return o->d;
}

static ref_t ref(uint16_t v, int32_t off) {
    ref_t r = {v, off};
    return r;
}

static uint16_t val(pk_abuild *b, uint8_t op, uint16_t a, uint16_t bb, uint16_t c, int32_t imm) {
    return emit(b, op, 0, a, bb, c, imm, 0, 1);
}

/* A value holding exactly x (an operation when x has a constant part). */
static uint16_t mat(pk_abuild *b, ref_t x) { return x.off ? val(b, A_ADD, x.v, V_ZERO, V_ZERO, x.off) : x.v; }

/* Register r as an operand of the instruction at addr (PC reads as addr + 4). */
static ref_t reg(pk_abuild *b, int r, uint32_t addr) { return r == 15 ? ref(V_ZERO, (int32_t)(addr + 4)) : b->cur[r]; }

/* Register r as a whole value (an operation that stays only if something needs it). */
static uint16_t regv(pk_abuild *b, int r, uint32_t addr) { return mat(b, reg(b, r, addr)); }

static void set(pk_abuild *b, int r, ref_t x) {
    if (r < 15) b->cur[r] = x;
}

static void setv(pk_abuild *b, int r, uint16_t v) { set(b, r, ref(v, 0)); }

static void check(pk_abuild *b, ref_t base, ref_t index, int32_t imm, uint8_t mask, uint32_t pc) {
    if (base.v == V_ZERO && index.v == V_ZERO && !((uint32_t)(base.off + index.off + imm) & mask))
        return; /* a constant, aligned address */
    emit(b, A_CHECK, mask, base.v, index.v, V_ZERO, base.off + index.off + imm, pc, 0);
}

static uint16_t load(pk_abuild *b, ref_t base, ref_t index, int32_t imm, uint8_t size) {
    return emit(b, A_LOAD, size, base.v, index.v, V_ZERO, base.off + index.off + imm, 0, 1);
}

static void store(pk_abuild *b, ref_t base, ref_t index, int32_t imm, uint8_t size, uint16_t value) {
    emit(b, A_STORE, size, base.v, index.v, value, base.off + index.off + imm, 0, 0);
}

static void sp_set(pk_abuild *b, uint16_t v, uint32_t pc, uint8_t size) {
    emit(b, A_SPW, size, v, V_ZERO, V_ZERO, 0, pc, 0);
    b->sp_write = 1;
    b->cur[13] = ref(v, 0); /* checked aligned: the program stops at pc otherwise */
}

/* Load/store: size 1, 2, 4 (| SIGNED for LDRSB/LDRSH). */
static void access(pk_abuild *b, uint32_t addr, int is_load, uint8_t size, int rt, ref_t base, ref_t index,
                   int32_t imm) {
    uint8_t bytes = size & 7;
    if (bytes > 1) check(b, base, index, imm, (uint8_t)(bytes - 1), addr);
    if (is_load) setv(b, rt, load(b, base, index, imm, size));
    else store(b, base, index, imm, bytes, regv(b, rt, addr));
}

static int popcount8(uint32_t x) {
    int n = 0;
    for (x &= 0xFF; x; x &= x - 1) n++;
    return n;
}

static void shift_imm(pk_abuild *b, int op, int rd, int rm, uint32_t n, uint32_t addr) {
    if (op == 0 && n == 0) { /* MOVS Rd, Rm: carry unchanged */
        set(b, rd, reg(b, rm, addr));
        return;
    }
    uint16_t m = regv(b, rm, addr);
    if (op != 0 && n == 0) n = 32; /* LSR/ASR #32 */
    static const uint8_t vop[3] = {A_LSLI, A_LSRI, A_ASRI}, cop[3] = {A_CLSLI, A_CLSRI, A_CASRI};
    b->carry = val(b, cop[op], m, V_ZERO, V_ZERO, (int32_t)n);
    setv(b, rd, val(b, vop[op], m, V_ZERO, V_ZERO, (int32_t)n));
}

static void data_processing(pk_abuild *b, uint32_t hw, uint32_t addr) {
    int rdn = hw & 7, rm = (hw >> 3) & 7;
    uint32_t op = (hw >> 6) & 0xF;
    if (op == 8) return; /* TST */
    uint16_t x = regv(b, rdn, addr), y = regv(b, rm, addr), c = b->carry;
    switch (op) {
    case 0: setv(b, rdn, val(b, A_AND, x, y, V_ZERO, 0)); break;
    case 1: setv(b, rdn, val(b, A_EOR, x, y, V_ZERO, 0)); break;
    case 2: b->carry = val(b, A_CLSLR, x, y, c, 0); setv(b, rdn, val(b, A_LSLR, x, y, V_ZERO, 0)); break;
    case 3: b->carry = val(b, A_CLSRR, x, y, c, 0); setv(b, rdn, val(b, A_LSRR, x, y, V_ZERO, 0)); break;
    case 4: b->carry = val(b, A_CASRR, x, y, c, 0); setv(b, rdn, val(b, A_ASRR, x, y, V_ZERO, 0)); break;
    case 5: b->carry = val(b, A_CADC, x, y, c, 0); setv(b, rdn, val(b, A_ADC, x, y, c, 0)); break;
    case 6: b->carry = val(b, A_CSBC, x, y, c, 0); setv(b, rdn, val(b, A_SBC, x, y, c, 0)); break;
    case 7: b->carry = val(b, A_CRORR, x, y, c, 0); setv(b, rdn, val(b, A_RORR, x, y, V_ZERO, 0)); break;
    case 9: b->carry = val(b, A_CRSB, y, V_ZERO, V_ZERO, 0);             /* RSBS Rd, Rn, #0 */
            setv(b, rdn, val(b, A_RSB, y, V_ZERO, V_ZERO, 0)); break;
    case 10: b->carry = val(b, A_CSUB, x, y, V_ZERO, 0); break;          /* CMP */
    case 11: b->carry = val(b, A_CADD, x, y, V_ZERO, 0); break;          /* CMN */
    case 12: setv(b, rdn, val(b, A_ORR, x, y, V_ZERO, 0)); break;
    case 13: setv(b, rdn, val(b, A_MUL, x, y, V_ZERO, 0)); break;        /* MULS: carry unchanged */
    case 14: setv(b, rdn, val(b, A_BIC, x, y, V_ZERO, 0)); break;
    default: setv(b, rdn, val(b, A_MVN, y, V_ZERO, V_ZERO, 0)); break;
    }
}

static void misc(pk_abuild *b, uint32_t hw, uint32_t addr) {
    uint32_t top = hw >> 8, list = hw & 0xFF;
    int rd = hw & 7, rm = (hw >> 3) & 7;
    if (top == 0xB0) { /* ADD/SUB SP, SP, #imm7*4 */
        int32_t imm = (int32_t)(hw & 0x7F) * 4;
        b->cur[13].off += (hw & 0x80) ? -imm : imm;
        return;
    }
    if (top == 0xB2 || top == 0xBA) { /* SXTH SXTB UXTH UXTB; REV REV16 - REVSH */
        static const uint8_t ext[4] = {A_SXTH, A_SXTB, A_UXTH, A_UXTB},
                             rev[4] = {A_REV, A_REV16, A_REV /* undefined: never here */, A_REVSH};
        uint8_t op = top == 0xB2 ? ext[(hw >> 6) & 3] : rev[(hw >> 6) & 3];
        setv(b, rd, val(b, op, regv(b, rm, addr), V_ZERO, V_ZERO, 0));
        return;
    }
    if (top == 0xB4 || top == 0xB5) { /* PUSH {list, LR?}: lowest register at the lowest address */
        int n = popcount8(list) + (int)((hw >> 8) & 1);
        ref_t sp = b->cur[13];
        sp.off -= 4 * n;
        int k = 0;
        for (int r = 0; r < 8; r++)
            if (list & (1u << r)) store(b, sp, ref(V_ZERO, 0), 4 * k++, 4, regv(b, r, addr));
        if (hw & 0x100) store(b, sp, ref(V_ZERO, 0), 4 * k, 4, regv(b, 14, addr));
        b->cur[13] = sp;
        return;
    }
    if (top == 0xBC || top == 0xBD) { /* POP {list, PC?} */
        ref_t sp = b->cur[13];
        int k = 0;
        for (int r = 0; r < 8; r++)
            if (list & (1u << r)) setv(b, r, load(b, sp, ref(V_ZERO, 0), 4 * k++, 4));
        if (hw & 0x100) k++; /* PC: the block ends here */
        sp.off += 4 * k;
        b->cur[13] = sp;
        return;
    }
    /* CPS, BKPT, hints: no register changes */
}

static void load_multiple(pk_abuild *b, uint32_t hw, uint32_t addr) {
    int rn = (hw >> 8) & 7, k = 0;
    uint32_t list = hw & 0xFF;
    ref_t base = b->cur[rn], zero = ref(V_ZERO, 0);
    check(b, base, zero, 0, 3, addr);
    if (hw & 0x800) { /* LDM: writes back unless the base is in the list */
        uint16_t loaded[8];
        for (int r = 0; r < 8; r++)
            if (list & (1u << r)) loaded[r] = load(b, base, zero, 4 * k++, 4);
        for (int r = 0; r < 8; r++)
            if (list & (1u << r)) setv(b, r, loaded[r]);
        if (!(list & (1u << rn))) set(b, rn, ref(base.v, base.off + 4 * k));
    } else { /* STM Rn!, {list} */
        for (int r = 0; r < 8; r++)
            if (list & (1u << r)) store(b, base, zero, 4 * k++, 4, r == rn ? mat(b, base) : regv(b, r, addr));
        set(b, rn, ref(base.v, base.off + 4 * k));
    }
}

static void special(pk_abuild *b, uint32_t hw, uint32_t addr) {
    int dn = (int)(((hw >> 4) & 8) | (hw & 7)), m = (hw >> 3) & 0xF;
    switch ((hw >> 8) & 3) {
    case 0: /* ADD Rdn, Rm */
        if (dn == 15) return; /* a branch: the block ends */
        {
            ref_t x = reg(b, dn, addr), y = reg(b, m, addr);
            ref_t sum = x.v == V_ZERO ? ref(y.v, x.off + y.off)
                        : y.v == V_ZERO ? ref(x.v, x.off + y.off)
                                        : ref(val(b, A_ADD, x.v, y.v, V_ZERO, 0), x.off + y.off);
            if (dn == 13) sp_set(b, mat(b, sum), addr, 2);
            else set(b, dn, sum);
        }
        return;
    case 1: /* CMP Rn, Rm */
        b->carry = val(b, A_CSUB, regv(b, dn, addr), regv(b, m, addr), V_ZERO, 0);
        return;
    case 2: /* MOV Rd, Rm */
        if (dn == 15) return;
        if (dn == 13) sp_set(b, regv(b, m, addr), addr, 2);
        else set(b, dn, reg(b, m, addr));
        return;
    default: /* BX, BLX: the block ends (BLX sets LR) */
        if (hw & 0x80) set(b, 14, ref(V_ZERO, (int32_t)((addr + 2) | 1)));
        return;
    }
}

static void thirty_two(pk_abuild *b, uint32_t hw1, uint32_t hw2, uint32_t addr) {
    if ((hw2 & 0xD000) == 0xD000) { /* BL */
        set(b, 14, ref(V_ZERO, (int32_t)((addr + 4) | 1)));
        return;
    }
    if (hw1 == 0xF3EF) { /* MRS Rd, SYSm */
        int rd = (hw2 >> 8) & 0xF;
        uint32_t sysm = hw2 & 0xFF;
        if (sysm == 8 || sysm == 9) setv(b, rd, val(b, A_MRS, mat(b, b->cur[13]), V_ZERO, V_ZERO, (int32_t)sysm));
        else setv(b, rd, val(b, A_UNKNOWN, V_ZERO, V_ZERO, V_ZERO, 0));
        return;
    }
    if ((hw1 & 0xFFF0) == 0xF380) { /* MSR SYSm, Rn */
        uint32_t sysm = hw2 & 0xFF;
        if (sysm == 8 || sysm == 9) {
            emit(b, A_SPW, 4, regv(b, hw1 & 0xF, addr), V_ZERO, V_ZERO, 0, addr, 0);
            b->sp_write = 1;
        }
        if (sysm == 8 || sysm == 9 || sysm == 20) /* an SP, or CONTROL (which SP is in use) */
            setv(b, 13, val(b, A_UNKNOWN, V_ZERO, V_ZERO, V_ZERO, 0));
        if (sysm <= 3) b->carry = val(b, A_UNKNOWN, V_ZERO, V_ZERO, V_ZERO, 0); /* APSR written */
        return;
    }
    /* DMB, DSB, ISB */
}

int pk_abuild_insn(pk_abuild *b, uint32_t addr, uint32_t hw, uint32_t hw2, int lit_ok, uint32_t lit_word,
                   int lit_const) {
    hw &= 0xFFFF;
    int rd = hw & 7, rn = (hw >> 3) & 7, rm = (hw >> 6) & 7;
    ref_t zero = ref(V_ZERO, 0);
    if ((hw >> 11) >= 0x1D) {
        thirty_two(b, hw, hw2 & 0xFFFF, addr);
    } else if (hw < 0x4000) {
        uint32_t op = (hw >> 9) & 0x1F;
        if (op < 12) {
            shift_imm(b, (int)(op >> 2), rd, rn, (hw >> 6) & 0x1F, addr);
        } else if (op < 16) { /* ADDS/SUBS Rd, Rn, Rm / #imm3 */
            int is_sub = op & 1, is_imm = op >= 14;
            ref_t x = b->cur[rn], y = is_imm ? ref(V_ZERO, rm) : b->cur[rm];
            uint16_t xv = regv(b, rn, addr), yv = is_imm ? V_ZERO : regv(b, rm, addr);
            b->carry = val(b, is_sub ? A_CSUB : A_CADD, xv, yv, V_ZERO, is_imm ? rm : 0);
            if (y.v == V_ZERO) set(b, rd, ref(x.v, is_sub ? x.off - y.off : x.off + y.off));
            else setv(b, rd, val(b, is_sub ? A_SUB : A_ADD, xv, yv, V_ZERO, 0));
        } else {
            int r8 = (hw >> 8) & 7;
            int32_t imm8 = hw & 0xFF;
            switch ((hw >> 11) & 3) {
            case 0: set(b, r8, ref(V_ZERO, imm8)); break; /* MOVS #imm8: carry unchanged */
            case 1: b->carry = val(b, A_CSUB, regv(b, r8, addr), V_ZERO, V_ZERO, imm8); break;
            case 2: b->carry = val(b, A_CADD, regv(b, r8, addr), V_ZERO, V_ZERO, imm8);
                    b->cur[r8].off += imm8; break;
            default: b->carry = val(b, A_CSUB, regv(b, r8, addr), V_ZERO, V_ZERO, imm8);
                     b->cur[r8].off -= imm8; break;
            }
        }
    } else if (hw < 0x4400) {
        data_processing(b, hw, addr);
    } else if (hw < 0x4800) {
        special(b, hw, addr);
    } else if (hw < 0x5000) { /* LDR Rt, [PC, #imm8*4] */
        int rt = (hw >> 8) & 7;
        uint32_t lit = ((addr + 4) & ~3u) + (hw & 0xFF) * 4;
        if (lit_ok && lit_const) set(b, rt, ref(V_ZERO, (int32_t)lit_word));
        else setv(b, rt, load(b, ref(V_ZERO, (int32_t)lit), zero, 0, 4)); /* in writable memory: read when run */
    } else if (hw < 0x6000) { /* load/store register offset */
        static const uint8_t size[8] = {4, 2, 1, 1 | SIGNED, 4, 2, 1, 2 | SIGNED};
        uint32_t op = (hw >> 9) & 7;
        access(b, addr, op >= 3, size[op], rd, b->cur[rn], b->cur[rm], 0);
    } else if (hw < 0x9000) { /* load/store immediate offset */
        uint32_t imm5 = (hw >> 6) & 0x1F;
        int is_load = (hw >> 11) & 1;
        if (hw < 0x7000) access(b, addr, is_load, 4, rd, b->cur[rn], zero, (int32_t)imm5 * 4);
        else if (hw < 0x8000) access(b, addr, is_load, 1, rd, b->cur[rn], zero, (int32_t)imm5);
        else access(b, addr, is_load, 2, rd, b->cur[rn], zero, (int32_t)imm5 * 2);
    } else if (hw < 0xA000) { /* STR/LDR Rt, [SP, #imm8*4]: SP is word aligned, no check */
        int rt = (hw >> 8) & 7;
        int32_t imm = (int32_t)(hw & 0xFF) * 4;
        if (hw & 0x800) setv(b, rt, load(b, b->cur[13], zero, imm, 4));
        else store(b, b->cur[13], zero, imm, 4, regv(b, rt, addr));
    } else if (hw < 0xA800) { /* ADR */
        set(b, (hw >> 8) & 7, ref(V_ZERO, (int32_t)(((addr + 4) & ~3u) + (hw & 0xFF) * 4)));
    } else if (hw < 0xB000) { /* ADD Rd, SP, #imm8*4 */
        set(b, (hw >> 8) & 7, ref(b->cur[13].v, b->cur[13].off + (int32_t)(hw & 0xFF) * 4));
    } else if (hw < 0xC000) {
        misc(b, hw, addr);
    } else if (hw < 0xD000) {
        load_multiple(b, hw, addr);
    } else if ((hw & 0xFF00) == 0xDF00) { /* SVC: exception entry ends the block, writes LR */
        setv(b, 14, val(b, A_UNKNOWN, V_ZERO, V_ZERO, V_ZERO, 0));
    }
    /* B<cond>, B, UDF: the block ends, no register written */
    return b->failed ? -1 : 0;
}

/* ---------------------------------------------------------------- cutting down */

static int yields(const pk_aop *o) { return o->d != A_NONE; }

static uint32_t ctz32(uint32_t x) { return x ? (uint32_t)__builtin_ctz(x) : 32; }

static uint32_t min32(uint32_t a, uint32_t b) { return a < b ? a : b; }

/* Low bits known to be zero: a value whose low bits are zero adds nothing to an
 * address's alignment (an index scaled by LSLS #2 or MULS by 4, a pointer masked by
 * BICS/ANDS, SP), so a check drops it from its operands. Values in program order, from
 * the operations that make them; the entry registers but SP and loaded values: none
 * known. */
static void simplify_checks(pk_abuild *b) {
    uint8_t *tz = calloc(b->next, 1);
    if (!tz) return; /* only an optimisation */
    tz[V_ZERO] = 32;
    tz[13] = 2; /* SP at block entry: the core keeps its bits [1:0] zero */
    for (uint32_t i = 0; i < b->n; i++) {
        pk_aop *o = &b->ops[i];
        uint32_t ta = tz[o->a], tb = tz[o->b], ti = ctz32((uint32_t)o->imm), t = 0;
        switch (o->op) {
        case A_CONST: t = ti; break;
        case A_ADD:
        case A_SUB: t = min32(min32(ta, tb), ti); break;
        case A_RSB: t = min32(ta, ti); break;
        case A_MUL: t = min32(ta + tb, 32); break;
        case A_AND: t = ta > tb ? ta : tb; break;
        case A_ORR:
        case A_EOR: t = min32(ta, tb); break;
        case A_BIC: t = ta; break;
        case A_LSLI: t = min32(ta + (uint32_t)o->imm, 32); break;
        case A_SXTB: case A_UXTB: t = min32(ta, 8); break;
        case A_SXTH: case A_UXTH: t = min32(ta, 16); break;
        case A_CHECK: {
            uint32_t need = o->size == 3 ? 2 : 1; /* alignment bits the check looks at */
            uint16_t a = o->a, bb = o->b;
            if (ta >= need) o->a = V_ZERO;
            if (tb >= need) o->b = V_ZERO;
            if (o->a == V_ZERO && o->b == V_ZERO && !((uint32_t)o->imm & o->size))
                o->op = A_NOP; /* aligned whatever the values */
            else if (o->a != a || o->b != bb)
                o->size |= CHECK_PARTIAL; /* (its failure is reported at the access) */
            break;
        }
        default: break;
        }
        if (o->d != A_NONE && o->d < b->next) tz[o->d] = (uint8_t)t;
    }
    free(tz);
}

/* A value a quick program's operation may read (unaligned.h pk_align_quick): a
 * register the block received but PC, zero, or one of the program's loads before it. */
static int quick_operand(uint16_t x, uint16_t next) { return x < 15 || x == V_ZERO || (x >= V_FIRST && x < next); }

/* Whether a cut-down program (n operations, the head first) is a quick one. */
static int quick_shape(const pk_aop *head, uint32_t n) {
    uint16_t next = V_FIRST; /* the value the next load yields */
    if (n < 2 || n > 1 + PK_QUICK_OPS) return 0;
    for (uint32_t i = 1; i < n; i++) {
        const pk_aop *o = &head[i];
        if (o->op == A_LOAD || o->op == A_CHECK_LOAD) {
            if (o->size != 4 || o->d != next) return 0;
        } else if (o->op != A_CHECK && o->op != A_STORE && o->op != A_STORE_ANY && o->op != A_CHECK_STORE) {
            return 0;
        }
        if (!quick_operand(o->a, next) || !quick_operand(o->b, next)) return 0;
        if (o->op == A_LOAD || o->op == A_CHECK_LOAD) next++;
    }
    return 1;
}

/* A check implied by an earlier one: the same registers, and an offset that differs
 * by a multiple of this check's alignment (a mask no larger than the earlier one's).
 * If the earlier check passes this one does; if it fails, the program stops there. A
 * loop body unrolled over a pointer keeps one check per pointer. */
static void drop_implied_checks(pk_abuild *b) {
    for (uint32_t i = 0; i < b->n; i++) {
        pk_aop *o = &b->ops[i];
        if (o->op != A_CHECK) continue;
        for (uint32_t j = 0; j < i; j++) {
            const pk_aop *e = &b->ops[j];
            if (e->op == A_CHECK && (e->size & 3) >= (o->size & 3) &&
                ((e->a == o->a && e->b == o->b) || (e->a == o->b && e->b == o->a)) &&
                !((uint32_t)(o->imm - e->imm) & o->size & 3)) {
                o->op = A_NOP;
                break;
            }
        }
    }
}

int pk_abuild_finish(pk_abuild *b, pk_aprog *prog, uint32_t *first, uint32_t *n) {
    if (b->failed) return -1;
    simplify_checks(b);
    drop_implied_checks(b);
    uint32_t nv = b->next, kept = 0, have_check = 0;
    uint8_t *need = calloc(nv, 1), *keep = calloc(b->n ? b->n : 1, 1);
    uint16_t *map = malloc(nv * sizeof(uint16_t));
    if (!need || !keep || !map) {
        free(need);
        free(keep);
        free(map);
        return -1;
    }
    /* Backwards: keep the checks and what they need. A store before a kept load is
     * kept when the two may overlap; its value is worked out only when they surely do
     * (the same registers and overlapping constant offsets: a spill and its reload).
     * Stores through other registers keep only their address, and a load they turn
     * out to overlap is not known (the block is then split there). */
    pk_aop *loads = malloc((b->n ? b->n : 1) * sizeof(pk_aop));
    uint32_t nloads = 0;
    if (!loads) {
        free(need);
        free(keep);
        free(map);
        return -1;
    }
    for (uint32_t i = b->n; i-- > 0;) {
        pk_aop *o = &b->ops[i];
        int k = o->op == A_CHECK || o->op == A_SPW || (yields(o) && need[o->d]);
        if (o->op == A_STORE) {
            int overlap = 0;
            for (uint32_t j = 0; j < nloads && overlap < 2; j++) {
                const pk_aop *l = &loads[j];
                if ((l->a == o->a && l->b == o->b) || (l->a == o->b && l->b == o->a)) {
                    uint32_t ls = l->size & 7;
                    if ((uint32_t)(l->imm - o->imm) < o->size || (uint32_t)(o->imm - l->imm) < ls) overlap = 2;
                } else {
                    overlap = 1;
                }
            }
            if (overlap == 1) {
                o->op = A_STORE_ANY;
                o->c = V_ZERO;
            }
            k = overlap > 0;
        }
        if (!k) continue;
        keep[i] = 1;
        kept++;
        need[o->a] = need[o->b] = need[o->c] = 1;
        if (o->op == A_LOAD) loads[nloads++] = *o;
        if (o->op == A_CHECK || o->op == A_SPW) have_check = 1;
    }
    free(loads);
    /* Number the kept values densely after the fixed ones; note the entry values read. */
    uint32_t entry = 0, count = V_FIRST;
    for (uint32_t v = 0; v < V_FIRST; v++) map[v] = (uint16_t)v;
    for (uint32_t i = 0; i < b->n; i++)
        if (keep[i] && yields(&b->ops[i])) map[b->ops[i].d] = (uint16_t)count++;
    for (uint32_t v = 0; v <= V_CARRY; v++)
        if (need[v]) entry |= 1u << v;
    free(need);
    uint32_t total = have_check ? kept + 1 : 0; /* at most: the head, then the kept operations */
    if (prog->used + total > prog->cap) {
        uint32_t cap = prog->cap ? prog->cap : 1024;
        while (cap < prog->used + total) cap *= 2;
        pk_aop *ops = realloc(prog->ops, cap * sizeof(pk_aop));
        if (!ops) {
            free(keep);
            free(map);
            return -1;
        }
        prog->ops = ops;
        prog->cap = cap;
    }
    *first = prog->used;
    *n = 0;
    if (total) {
        pk_aop *head = &prog->ops[prog->used], *out = head + 1;
        memset(head, 0, sizeof(*head));
        head->op = A_HEAD;
        head->a = head->b = head->c = V_ZERO;
        if (count > MAX_VALUES) {
            /* Too big to run before the block: check what the entry registers give,
             * and split the block at the first check that needs more. */
            entry = 0;
            for (uint32_t i = 0; i < b->n; i++) {
                const pk_aop *o = &b->ops[i];
                if (!keep[i] || (o->op != A_CHECK && o->op != A_SPW)) continue;
                if (o->a >= V_FIRST || o->b >= V_FIRST) {
                    memset(out, 0, sizeof(*out));
                    out->op = A_SPLIT;
                    out->pc = o->pc;
                    out->d = A_NONE;
                    out->a = out->b = out->c = V_ZERO;
                    out++;
                    break;
                }
                *out++ = *o;
                entry |= (1u << o->a | 1u << o->b) & ((1u << V_ZERO) - 1);
            }
            head->d = V_FIRST;
        } else {
            for (uint32_t i = 0; i < b->n; i++) {
                if (!keep[i]) continue;
                const pk_aop *o = &b->ops[i], *next = i + 1 < b->n && keep[i + 1] ? &b->ops[i + 1] : NULL;
                *out = *o;
                if (o->op == A_CHECK && !(o->size & CHECK_PARTIAL) && next &&
                    (next->op == A_LOAD || next->op == A_STORE) && next->a == o->a &&
                    next->b == o->b && next->imm == o->imm) {
                    /* the access itself: one operation checks and does it */
                    *out = *next;
                    out->op = next->op == A_LOAD ? A_CHECK_LOAD : A_CHECK_STORE;
                    out->pc = o->pc;
                    i++;
                }
                out->a = map[out->a];
                out->b = map[out->b];
                out->c = map[out->c];
                if (yields(out)) out->d = map[out->d];
                out++;
            }
            head->d = (uint16_t)count;
        }
        head->imm = (int32_t)entry;
        *n = (uint32_t)(out - head);
        if (*n == 3 && head[1].op == A_CHECK_LOAD && head[2].op == A_CHECK && !(head[2].size & CHECK_PARTIAL) &&
            head[2].a == head[1].d &&
            (head[1].a < 16 || head[1].a == V_ZERO) && (head[1].b < 16 || head[1].b == V_ZERO) &&
            (head[2].b < 16 || head[2].b == V_ZERO))
            head->size = SHAPE_LOAD_CHECK;
        if (quick_shape(head, *n)) head->size |= PK_SHAPE_QUICK;
        prog->used += *n;
    }
    free(keep);
    free(map);
    return 0;
}

int pk_aop_entry_check(const pk_aop *o, int *a, int *b, int32_t *off, uint8_t *mask, int *partial) {
    if (o->op != A_CHECK || (o->a > 15 && o->a != V_ZERO) || (o->b > 15 && o->b != V_ZERO)) return 0;
    *a = o->a == V_ZERO ? -1 : o->a;
    *b = o->b == V_ZERO ? -1 : o->b;
    *off = o->imm;
    *mask = o->size & 3;
    *partial = (o->size & CHECK_PARTIAL) != 0;
    return 1;
}

/* ---------------------------------------------------------------- running */

typedef struct {
    uint32_t addr, value, size, known;
} store_t;

typedef struct {
    store_t s[MAX_STORES];
    uint32_t n;
} stores_t;

/* Guest memory at [addr, addr + size) in host memory (NULL: not RAM or flash). */
const uint8_t *pk_amap_host(pk_amap *map, uint32_t addr, uint32_t size) {
    const pk_amem *m = &map->mem[map->last];
    if (addr - m->base < m->size && m->size - (addr - m->base) >= size)
        return m->host + (addr - m->base); /* where the last load was: most are */
    for (uint32_t i = 0; i < map->n; i++) {
        m = &map->mem[i];
        if (addr - m->base < m->size && m->size - (addr - m->base) >= size) {
            map->last = i;
            return m->host + (addr - m->base);
        }
    }
    return NULL;
}

static uint32_t host_value(const uint8_t *src, uint32_t size) {
    if (size == 4) return (uint32_t)src[0] | (uint32_t)src[1] << 8 | (uint32_t)src[2] << 16 | (uint32_t)src[3] << 24;
    return size == 2 ? (uint32_t)src[0] | (uint32_t)src[1] << 8 : src[0];
}

/* Guest memory at [addr, addr + size) as the block will see it: host memory, then the
 * block's earlier stores over it. 0 when it cannot be known before the block runs. */
static int mem_get(pk_amap *map, const stores_t *st, uint32_t addr, uint32_t size, uint32_t *out) {
    const uint8_t *src = pk_amap_host(map, addr, size);
    if (!src) return 0;
    if (!st->n) { /* no store before it: the host bytes, little-endian as the guest's */
        *out = host_value(src, size);
        return 1;
    }
    uint8_t bytes[4] = {0, 0, 0, 0};
    if (size == 4) memcpy(bytes, src, 4);
    else if (size == 2) memcpy(bytes, src, 2);
    else bytes[0] = src[0];
    for (uint32_t k = 0; k < st->n; k++) {
        const store_t *s = &st->s[k];
        uint64_t lo = s->addr > addr ? s->addr : addr;
        uint64_t hi = (uint64_t)s->addr + s->size < (uint64_t)addr + size ? (uint64_t)s->addr + s->size
                                                                            : (uint64_t)addr + size;
        if (lo < hi && !s->known) return 0;
        for (uint64_t j = lo; j < hi; j++) bytes[j - addr] = (uint8_t)(s->value >> (8 * (j - s->addr)));
    }
    *out = (uint32_t)bytes[0] | (uint32_t)bytes[1] << 8 | (uint32_t)bytes[2] << 16 | (uint32_t)bytes[3] << 24;
    return 1;
}

static uint32_t ror32(uint32_t x, uint32_t n) { return n ? (x >> n) | (x << (32 - n)) : x; }

/* A value is not known before the block runs (a load from a peripheral or unmapped
 * memory, a store to an unknown address before a load, an unmodelled special
 * register): everything after it is unknown too, so the program stops at its next
 * check. That check is at or before the first check depending on the value, and
 * after the block's start, so splitting the block there is exact and makes progress. */
static uint32_t entry_reg(const pk_aregs *regs, uint16_t r) {
    uint32_t x = 0;
    if (r == V_ZERO) return 0;
    if (regs->in_place && r < 15) return regs->in_place[r];
    regs->reg_read(regs->uc, regs->regids[r], &x);
    return x;
}

/* The program most blocks with one have (a pointer loaded from [entry registers +
 * constant], then used as an address), without the general machinery. */
static int load_then_check(const pk_aop *ops, pk_amap *map, const pk_aregs *regs, uint32_t *pc, uint32_t *addr) {
    const pk_aop *l = &ops[1], *c = &ops[2];
    uint32_t ra = entry_reg(regs, l->a), rb = entry_reg(regs, l->b), size = l->size & 7;
    uint32_t a = ra + rb + (uint32_t)l->imm, t;
    if (a & (size - 1)) {
        *pc = l->pc;
        *addr = a;
        return PK_ALIGN_FAULT;
    }
    const uint8_t *src = pk_amap_host(map, a, size);
    if (!src) {
        *pc = c->pc;
        *addr = 0;
        return PK_ALIGN_SPLIT;
    }
    t = host_value(src, size);
    if (l->size & SIGNED) t = size == 1 ? (uint32_t)(int32_t)(int8_t)t : (uint32_t)(int32_t)(int16_t)t;
    uint32_t cb = c->b == l->a ? ra : c->b == l->b ? rb : entry_reg(regs, c->b);
    a = t + cb + (uint32_t)c->imm;
    if (a & c->size) {
        *pc = c->pc;
        *addr = a;
        return PK_ALIGN_FAULT;
    }
    return PK_ALIGN_OK;
}

int pk_align_run(const pk_aop *ops, uint32_t n, pk_amap *map, const pk_aregs *regs, uint32_t *pc,
                 uint32_t *addr) {
    uint32_t v[MAX_VALUES];
    stores_t st;
    int unknown = 0;
    if (!n) return PK_ALIGN_OK;
    if (ops->size & SHAPE_LOAD_CHECK) return load_then_check(ops, map, regs, pc, addr);
    const pk_aop *o = ops, *end = ops + n;
    uint32_t entry = (uint32_t)o->imm;
    v[V_ZERO] = 0;
    if (entry & (1u << V_CARRY)) {
        uint32_t apsr = 0;
        regs->reg_read(regs->uc, regs->apsr_id, &apsr);
        v[V_CARRY] = apsr >> 29 & 1;
        entry &= ~(1u << V_CARRY);
    }
    if (regs->in_place && !(entry & (1u << 15))) {
        memcpy(v, regs->in_place, 15 * sizeof(uint32_t)); /* r0-r14 in one copy: fewer steps than the mask's */
    } else {
        while (entry) {
            uint32_t r = (uint32_t)__builtin_ctz(entry);
            v[r] = entry_reg(regs, (uint16_t)r);
            entry &= entry - 1;
        }
    }
    st.n = 0;
    for (o++; o < end; o++) {
        uint32_t x = v[o->a], y = v[o->b], r = 0, sh;
        /* The most frequent operations first, outside the jump table (fewer
         * mispredicted indirect jumps). */
        if (o->op == A_CHECK) {
            uint32_t a = x + y + (uint32_t)o->imm;
            if (unknown || (a & o->size & 3)) {
                int split = unknown || (o->size & CHECK_PARTIAL); /* (the address: found at the access) */
                *pc = o->pc;
                *addr = split ? 0 : a;
                return split ? PK_ALIGN_SPLIT : PK_ALIGN_FAULT;
            }
            continue;
        }
        if (o->op == A_LOAD && o->size == 4 && !st.n) { /* (a local's value from the stack, most often) */
            const uint8_t *src = pk_amap_host(map, x + y + (uint32_t)o->imm, 4);
            v[o->d] = src ? host_value(src, 4) : 0;
            if (!src) unknown = 1;
            continue;
        }
        if (o->op == A_CHECK_LOAD && o->size == 4) {
            uint32_t a = x + y + (uint32_t)o->imm;
            if (unknown || (a & 3)) {
                *pc = o->pc;
                *addr = unknown ? 0 : a;
                return unknown ? PK_ALIGN_SPLIT : PK_ALIGN_FAULT;
            }
            if (!mem_get(map, &st, a, 4, &r)) unknown = 1;
            v[o->d] = r;
            continue;
        }
        switch (o->op) {
        case A_CONST: r = (uint32_t)o->imm; break;
        case A_UNKNOWN: unknown = 1; break;
        case A_ADD: r = x + y + (uint32_t)o->imm; break;
        case A_SUB: r = x - y - (uint32_t)o->imm; break;
        case A_RSB: r = (uint32_t)o->imm - x; break;
        case A_ADC: r = x + y + v[o->c]; break;
        case A_SBC: r = x + ~y + v[o->c]; break;
        case A_CADD: r = (uint32_t)(((uint64_t)x + (uint32_t)(y + (uint32_t)o->imm)) >> 32); break;
        case A_CSUB: r = x >= (uint32_t)(y + (uint32_t)o->imm); break;
        case A_CADC: r = (uint32_t)(((uint64_t)x + y + v[o->c]) >> 32); break;
        case A_CSBC: r = (uint32_t)(((uint64_t)x + (uint32_t)~y + v[o->c]) >> 32); break;
        case A_CRSB: r = x == 0; break;
        case A_MUL: r = x * y; break;
        case A_AND: r = x & y; break;
        case A_ORR: r = x | y; break;
        case A_EOR: r = x ^ y; break;
        case A_BIC: r = x & ~y; break;
        case A_MVN: r = ~x; break;
        case A_LSLI: r = x << o->imm; break;
        case A_LSRI: r = o->imm >= 32 ? 0 : x >> o->imm; break;
        case A_ASRI: r = (uint32_t)((int32_t)x >> (o->imm >= 32 ? 31 : o->imm)); break;
        case A_CLSLI: r = x >> (32 - o->imm) & 1; break;
        case A_CLSRI: r = x >> (o->imm - 1) & 1; break;
        case A_CASRI: r = o->imm >= 32 ? x >> 31 : x >> (o->imm - 1) & 1; break;
        case A_LSLR: sh = y & 0xFF; r = sh >= 32 ? 0 : x << sh; break;
        case A_LSRR: sh = y & 0xFF; r = sh >= 32 ? 0 : x >> sh; break;
        case A_ASRR: sh = y & 0xFF; r = (uint32_t)((int32_t)x >> (sh >= 32 ? 31 : sh)); break;
        case A_RORR: sh = y & 0xFF; r = ror32(x, sh & 31); break;
        case A_CLSLR: sh = y & 0xFF; r = sh == 0 ? v[o->c] : sh <= 32 ? x >> (32 - sh) & 1 : 0; break;
        case A_CLSRR: sh = y & 0xFF; r = sh == 0 ? v[o->c] : sh <= 32 ? x >> (sh - 1) & 1 : 0; break;
        case A_CASRR: sh = y & 0xFF; r = sh == 0 ? v[o->c] : sh < 32 ? x >> (sh - 1) & 1 : x >> 31; break;
        case A_CRORR: sh = y & 0xFF; r = sh == 0 ? v[o->c] : ror32(x, sh & 31) >> 31; break;
        case A_SXTB: r = (uint32_t)(int32_t)(int8_t)x; break;
        case A_SXTH: r = (uint32_t)(int32_t)(int16_t)x; break;
        case A_UXTB: r = x & 0xFF; break;
        case A_UXTH: r = x & 0xFFFF; break;
        case A_REV: r = x >> 24 | (x >> 8 & 0xFF00) | (x << 8 & 0xFF0000) | x << 24; break;
        case A_REV16: r = (x >> 8 & 0x00FF00FF) | (x << 8 & 0xFF00FF00); break;
        case A_REVSH: r = (uint32_t)(int32_t)(int16_t)(uint16_t)((x >> 8 & 0xFF) | (x << 8 & 0xFF00)); break;
        case A_CHECK_LOAD:
        case A_LOAD: {
            uint32_t size = o->size & 7, a = x + y + (uint32_t)o->imm;
            if (o->op == A_CHECK_LOAD) {
                if (unknown) {
                    *pc = o->pc;
                    *addr = 0;
                    return PK_ALIGN_SPLIT;
                }
                if (a & (size - 1)) {
                    *pc = o->pc;
                    *addr = a;
                    return PK_ALIGN_FAULT;
                }
            }
            if (!mem_get(map, &st, a, size, &r)) unknown = 1;
            else if (o->size & SIGNED) r = size == 1 ? (uint32_t)(int32_t)(int8_t)r : (uint32_t)(int32_t)(int16_t)r;
            break;
        }
        case A_CHECK_STORE:
            if (unknown) {
                *pc = o->pc;
                *addr = 0;
                return PK_ALIGN_SPLIT;
            }
            if ((x + y + (uint32_t)o->imm) & (o->size - 1u)) {
                *pc = o->pc;
                *addr = x + y + (uint32_t)o->imm;
                return PK_ALIGN_FAULT;
            }
            /* fall through: the store */
        case A_STORE:
        case A_STORE_ANY:
            if (st.n == MAX_STORES) {
                unknown = 1; /* later loads cannot be known */
                continue;
            }
            st.s[st.n].addr = x + y + (uint32_t)o->imm;
            st.s[st.n].value = v[o->c];
            st.s[st.n].size = o->size;
            st.s[st.n].known = o->op != A_STORE_ANY;
            st.n++;
            continue;
        case A_SPW:
            if (unknown || (x & 3)) {
                *pc = o->pc;
                *addr = o->pc + o->size;
                return PK_ALIGN_SP_WRITE;
            }
            continue;
        case A_MRS: {
            uint32_t control = 0, ipsr = 0;
            regs->reg_read(regs->uc, regs->control_id, &control);
            regs->reg_read(regs->uc, regs->ipsr_id, &ipsr);
            int psp_active = (ipsr & 0x3F) == 0 && (control & 2);
            if (psp_active == (o->imm == 9)) r = x;
            else regs->reg_read(regs->uc, o->imm == 9 ? regs->psp_id : regs->msp_id, &r);
            break;
        }
        case A_SPLIT:
            *pc = o->pc;
            *addr = 0;
            return PK_ALIGN_SPLIT;
        default:
            continue;
        }
        v[o->d] = r;
    }
    return PK_ALIGN_OK;
}
