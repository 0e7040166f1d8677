/*
 * pkasim Thumb decoder (see thumb.h): the ARMv6-M instruction set, its costs and its
 * address arithmetic, decided from the encoding alone.
 *
 * Which encodings exist: ARMv6-M Architecture Reference Manual (DDI0419) chapter A5,
 * "Thumb instruction set encoding". Everything outside it is UNDEFINED on an ARMv6-M
 * core: CBZ/CBNZ, IT, the 32-bit Thumb-2 instructions (MOVW, UDIV, LDR.W, ...), VFP,
 * UDF. Where the manual calls an encoding UNPREDICTABLE because of its should-be-zero
 * or should-be-one bits, or because its register list is empty, we decode it as
 * UNDEFINED too (UNPREDICTABLE permits that; no compiler emits them). UNPREDICTABLE
 * register choices of a valid encoding (CMP r0, r1 in the high-register form, ADD PC,
 * PC) execute as Unicorn executes them.
 *
 * Costs: ARM DDI0432C (Cortex-M0 TRM) table 3-1, as docs/cycle-model.md lists them.
 */
#include "thumb.h"

#define R_SP 13
#define R_LR 14
#define R_PC 15

static int popcount8(uint32_t x) {
    int n = 0;
    for (x &= 0xFF; x; x &= x - 1) n++;
    return n;
}

/* Registers r0-r14 in a mask (PC is never an address register we track). */
static uint16_t wm(int r) { return r >= 0 && r < 15 ? (uint16_t)(1u << r) : 0; }

static void set_undefined(pk_insn *o) {
    o->undefined = 1;
    o->cost = 1;
    o->flags = 0;
}

/* ARMv6-M special registers (DDI0419 B4.2.3 MRS/MSR SYSm): APSR, IAPSR, EAPSR, XPSR,
 * IPSR, EPSR, IEPSR, MSP, PSP, PRIMASK, CONTROL. */
static int sysm_ok(uint32_t sysm) {
    return sysm <= 3 || (sysm >= 5 && sysm <= 9) || sysm == 16 || sysm == 20;
}

static void decode32(uint32_t hw1, uint32_t hw2, pk_insn *o) {
    pk_desc *d = &o->desc;
    /* Branch and miscellaneous control (DDI0419 A5.3.1): hw1 11110xxx, hw2 1xxx. */
    if ((hw1 & 0xF800) == 0xF000 && (hw2 & 0x8000)) {
        if ((hw2 & 0xD000) == 0xD000) { /* BL */
            o->cost = 4;
            o->flags = PK_F_BRANCH;
            d->wmask = wm(R_LR);
            return;
        }
        /* MSR: 11110 0111 00 0 Rn | 10 (0) 0 (1)(0)(0)(0) SYSm */
        if ((hw1 & 0xFFF0) == 0xF380 && (hw2 & 0xFF00) == 0x8800 && sysm_ok(hw2 & 0xFF)) {
            o->cost = 4;
            o->flags = PK_F_IRQCHK;
            return;
        }
        /* MRS: 11110 0111 11 0 (1)(1)(1)(1) | 10 (0) 0 Rd SYSm */
        if (hw1 == 0xF3EF && (hw2 & 0xF000) == 0x8000 && sysm_ok(hw2 & 0xFF)) {
            o->cost = 4;
            d->wmask = wm((hw2 >> 8) & 0xF);
            return;
        }
        /* DSB, DMB, ISB: 11110 0111 01 1 (1)(1)(1)(1) | 10 (0) 0 (1)(1)(1)(1) 01xx option */
        if (hw1 == 0xF3BF && ((hw2 & 0xFFF0) == 0x8F40 || (hw2 & 0xFFF0) == 0x8F50 || (hw2 & 0xFFF0) == 0x8F60)) {
            o->cost = 4;
            return;
        }
    }
    set_undefined(o);
}

static void load_store(uint32_t hw, int size, int is_load, int rn, int rm, int32_t imm, pk_desc *d) {
    int rt = hw & 7;
    if (is_load) d->wmask = wm(rt);
    if (size > 1) {
        d->kind = K_ACCESS;
        d->rn = (int8_t)rn;
        d->rm = (int8_t)rm;
        d->imm = imm;
        d->amask = (uint8_t)(size - 1);
    } else {
        d->kind = K_NONE;
    }
}

static void decode16(uint32_t addr, uint32_t hw, uint32_t muls, pk_insn *o) {
    pk_desc *d = &o->desc;
    int rd = hw & 7, rn = (hw >> 3) & 7, rm = (hw >> 6) & 7;
    uint32_t top = hw >> 8;

    if (hw < 0x4000) {
        /* Shift (immediate), add, subtract, move, and compare (DDI0419 A5.2.1) */
        uint32_t op = (hw >> 9) & 0x1F;
        if (op < 4) { /* LSLS imm: with a zero shift it is MOVS Rd, Rm */
            d->wmask = wm(rd);
            if (((hw >> 6) & 0x1F) == 0) {
                d->kind = K_ADDI;
                d->rd = (int8_t)rd;
                d->rn = (int8_t)rn;
            }
        } else if (op < 12) { /* LSRS, ASRS imm */
            d->wmask = wm(rd);
        } else if (op == 12) { /* ADDS Rd, Rn, Rm */
            d->kind = K_ADDR;
            d->rd = (int8_t)rd;
            d->rn = (int8_t)rn;
            d->rm = (int8_t)rm;
            d->wmask = wm(rd);
        } else if (op == 13) { /* SUBS Rd, Rn, Rm */
            d->wmask = wm(rd);
        } else if (op == 14 || op == 15) { /* ADDS/SUBS Rd, Rn, #imm3 */
            d->kind = K_ADDI;
            d->rd = (int8_t)rd;
            d->rn = (int8_t)rn;
            d->imm = op == 14 ? rm : -rm;
            d->wmask = wm(rd);
        } else {
            int r8 = (hw >> 8) & 7;
            int32_t imm8 = hw & 0xFF;
            switch ((hw >> 11) & 3) {
            case 0: /* MOVS Rd, #imm8 */
                d->kind = K_CONST;
                d->rd = (int8_t)r8;
                d->imm = imm8;
                d->wmask = wm(r8);
                break;
            case 1: /* CMP Rn, #imm8 */
                break;
            default: /* ADDS/SUBS Rdn, #imm8 */
                d->kind = K_ADDI;
                d->rd = (int8_t)r8;
                d->rn = (int8_t)r8;
                d->imm = ((hw >> 11) & 3) == 2 ? imm8 : -imm8;
                d->wmask = wm(r8);
                break;
            }
        }
        return;
    }
    if (hw < 0x4400) {
        /* Data processing (register) (A5.2.2) */
        uint32_t op = (hw >> 6) & 0xF;
        if (op == 8 || op == 10 || op == 11) return; /* TST, CMP, CMN */
        if (op == 13) o->cost = (uint16_t)muls;      /* MULS */
        d->wmask = wm(rd);
        return;
    }
    if (hw < 0x4800) {
        /* Special data processing and branch and exchange (A5.2.3) */
        int dn = (int)(((hw >> 4) & 8) | (hw & 7)), m = (hw >> 3) & 0xF;
        switch ((hw >> 8) & 3) {
        case 0: /* ADD Rdn, Rm (ADD Rd, SP, Rd when Rm is SP) */
            if (dn == R_PC) {
                o->cost = 3;
                o->flags = PK_F_BRANCH;
                return;
            }
            d->wmask = wm(dn);
            if (m == R_PC) return;
            d->kind = K_ADDR;
            d->rd = (int8_t)dn;
            if (m == R_SP) {
                d->rn = R_SP;
                d->rm = (int8_t)dn;
            } else {
                d->rn = (int8_t)dn;
                d->rm = (int8_t)m;
            }
            return;
        case 1: /* CMP Rn, Rm */
            return;
        case 2: /* MOV Rd, Rm */
            if (dn == R_PC) {
                o->cost = 3;
                o->flags = PK_F_BRANCH;
                return;
            }
            d->wmask = wm(dn);
            if (m != R_PC) {
                d->kind = K_ADDI;
                d->rd = (int8_t)dn;
                d->rn = (int8_t)m;
            }
            return;
        default: /* BX Rm / BLX Rm: 010001 11 L Rm (0)(0)(0) */
            if (hw & 7) {
                set_undefined(o);
                return;
            }
            o->cost = 3;
            o->flags = PK_F_BRANCH;
            if (hw & 0x80) d->wmask = wm(R_LR);
            return;
        }
    }
    if (hw < 0x5000) { /* LDR Rt, [PC, #imm8*4] (literal) */
        int rt = (hw >> 8) & 7;
        o->cost = 2;
        d->kind = K_LITERAL;
        d->rd = (int8_t)rt;
        d->imm = (int32_t)(((addr + 4) & ~3u) + (hw & 0xFF) * 4);
        d->wmask = wm(rt);
        return;
    }
    if (hw < 0x6000) { /* load/store register offset (A5.2.4) */
        static const int size[8] = {4, 2, 1, 1, 4, 2, 1, 2};
        uint32_t op = (hw >> 9) & 7;
        o->cost = 2;
        load_store(hw, size[op], op >= 3, rn, rm, 0, d);
        return;
    }
    if (hw < 0x9000) { /* load/store immediate offset */
        uint32_t imm5 = (hw >> 6) & 0x1F;
        int load = (hw >> 11) & 1;
        o->cost = 2;
        if (hw < 0x7000) load_store(hw, 4, load, rn, -1, (int32_t)imm5 * 4, d);
        else if (hw < 0x8000) load_store(hw, 1, load, rn, -1, (int32_t)imm5, d);
        else load_store(hw, 2, load, rn, -1, (int32_t)imm5 * 2, d);
        return;
    }
    if (hw < 0xA000) { /* STR/LDR Rt, [SP, #imm8*4] */
        o->cost = 2;
        if (hw & 0x800) d->wmask = wm((hw >> 8) & 7);
        d->kind = K_NONE;
        return;
    }
    if (hw < 0xA800) { /* ADR Rd, label */
        int r8 = (hw >> 8) & 7;
        d->kind = K_CONST;
        d->rd = (int8_t)r8;
        d->imm = (int32_t)(((addr + 4) & ~3u) + (hw & 0xFF) * 4);
        d->wmask = wm(r8);
        return;
    }
    if (hw < 0xB000) { /* ADD Rd, SP, #imm8*4 */
        int r8 = (hw >> 8) & 7;
        d->kind = K_ADDI;
        d->rd = (int8_t)r8;
        d->rn = R_SP;
        d->imm = (int32_t)(hw & 0xFF) * 4;
        d->wmask = wm(r8);
        return;
    }
    if (top < 0xC0) {
        /* Miscellaneous 16-bit instructions (A5.2.5), opcode = bits 11:5 */
        uint32_t list = hw & 0xFF;
        if (top == 0xB0) { /* ADD/SUB SP, SP, #imm7*4 */
            int32_t imm = (int32_t)(hw & 0x7F) * 4;
            d->kind = K_ADDI;
            d->rd = R_SP;
            d->rn = R_SP;
            d->imm = (hw & 0x80) ? -imm : imm;
            d->wmask = wm(R_SP);
            return;
        }
        if (top == 0xB2 || top == 0xBA) { /* SXTH SXTB UXTH UXTB; REV REV16 (undef) REVSH */
            if (top == 0xBA && ((hw >> 6) & 3) == 2) {
                set_undefined(o);
                return;
            }
            d->wmask = wm(rd);
            return;
        }
        if (top == 0xB4 || top == 0xB5) { /* PUSH {list, LR?} */
            int n = popcount8(list) + (int)((hw >> 8) & 1);
            if (n == 0) {
                set_undefined(o);
                return;
            }
            o->cost = (uint16_t)(1 + n);
            d->wmask = wm(R_SP);
            return;
        }
        if (top == 0xBC || top == 0xBD) { /* POP {list, PC?} */
            int n = popcount8(list);
            if (n == 0 && !(hw & 0x100)) {
                set_undefined(o);
                return;
            }
            if (hw & 0x100) {
                o->cost = (uint16_t)(4 + n);
                o->flags = PK_F_BRANCH;
            } else {
                o->cost = (uint16_t)(1 + n);
            }
            d->wmask = (uint16_t)(list | wm(R_SP));
            return;
        }
        if (hw == 0xB662) { /* CPSIE i: 1011 0110 011 0 (0)(0)(1)(0) */
            o->flags = PK_F_IRQCHK;
            return;
        }
        if (hw == 0xB672) /* CPSID i */
            return;
        if (top == 0xBE) /* BKPT #imm8 */
            return;
        if (top == 0xBF) { /* hints; a non-zero low nibble is IT (ARMv7-M only) */
            uint32_t op_a = (hw >> 4) & 0xF;
            if (hw & 0xF) {
                set_undefined(o);
                return;
            }
            if (op_a == 2 || op_a == 3) o->cost = 2; /* WFE, WFI */
            /* NOP, YIELD, SEV, and the unallocated hints (executed as NOP): 1 */
            return;
        }
        /* CBZ/CBNZ, SETEND, other CPS forms and the unallocated opcodes */
        set_undefined(o);
        return;
    }
    if (hw < 0xD000) { /* STM Rn!, {list} / LDM Rn{!}, {list} */
        uint32_t list = hw & 0xFF;
        int base = (hw >> 8) & 7;
        if (!list) {
            set_undefined(o);
            return;
        }
        o->cost = (uint16_t)(1 + popcount8(list));
        d->kind = K_ACCESS;
        d->rn = (int8_t)base;
        d->rm = -1;
        d->imm = 0;
        d->amask = 3;
        if (hw & 0x800) /* LDM writes back unless the base is in the list */
            d->wmask = (uint16_t)(list | ((list >> base) & 1 ? 0 : wm(base)));
        else
            d->wmask = wm(base);
        return;
    }
    if (hw < 0xE000) {
        uint32_t cond = (hw >> 8) & 0xF;
        if (cond == 0xE) { /* UDF #imm8: permanently undefined */
            set_undefined(o);
            return;
        }
        if (cond == 0xF) { /* SVC #imm8: exception entry writes LR */
            d->wmask = wm(R_LR);
            return;
        }
        o->cost = 3; /* B<cond>: 3 taken (the table's figure), 1 not taken */
        o->flags = (uint8_t)(PK_F_COND | PK_F_BRANCH | (cond << 4));
        if ((hw & 0xFF) == 0xFF) o->flags |= PK_F_CONDNEXT;
        return;
    }
    /* B label (0xE000-0xE7FF; the 32-bit prefixes never reach here) */
    o->cost = 3;
    o->flags = PK_F_BRANCH;
}

void pk_decode(uint32_t addr, uint32_t hw1, uint32_t hw2, const pk_rules *rules, pk_insn *o) {
    pk_desc *d = &o->desc;
    d->kind = K_CLOBBER;
    d->rd = d->rn = d->rm = -1;
    d->imm = 0;
    d->wmask = 0;
    d->amask = 0;
    d->pad = 0;
    o->cost = 1;
    o->size = (uint8_t)pk_insn_size(hw1);
    o->flags = 0;
    o->undefined = 0;
    o->pad[0] = o->pad[1] = o->pad[2] = 0;
    if (o->size == 4) decode32(hw1 & 0xFFFF, hw2 & 0xFFFF, o);
    else decode16(addr, hw1 & 0xFFFF, rules->muls_cycles, o);
    if (o->undefined) {
        d->kind = K_CLOBBER;
        d->rd = d->rn = d->rm = -1;
        d->imm = 0;
        d->wmask = 0;
        d->amask = 0;
        return;
    }
    /* Flash wait states: a 16-bit instruction at a word address fetches its word; one
     * at address 2 (mod 4) came with the previous fetch; a 32-bit instruction fetches
     * one word either way (docs/cycle-model.md). */
    if (rules->fetch_ws && addr >= rules->flash_base && addr < rules->flash_end &&
        ((addr & 2) == 0 || o->size == 4))
        o->cost = (uint16_t)(o->cost + rules->fetch_ws);
}

void pk_resolve_literal(pk_desc *d, int readable, uint32_t word) {
    if (d->kind != K_LITERAL) return;
    if (readable) {
        d->kind = K_CONST;
        d->imm = (int32_t)word;
    } else {
        d->kind = K_CLOBBER;
        d->rd = -1;
        d->imm = 0;
    }
}
