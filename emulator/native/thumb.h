/*
 * pkasim Thumb decoder: what one ARMv6-M instruction costs and does to addresses.
 *
 * One call decodes one instruction from its halfwords: its size, whether it is an
 * ARMv6-M instruction at all (everything else is UNDEFINED on an SC000/Cortex-M0),
 * its cycles (ARM DDI0432C table 3-1), its flow flags, and how it computes or uses
 * an address register (for the alignment checks of cyclehook.c). emulator/core/cycles.py
 * states the same rules with capstone; tests/test_decoder.py holds the two equal over
 * every 16-bit encoding, a large set of 32-bit ones and all code of every image.
 */
#ifndef PK_THUMB_H
#define PK_THUMB_H

#include <stdint.h>

#define PK_F_COND 0x01     /* conditional branch: the cost is the taken cost */
#define PK_F_BRANCH 0x02   /* changes the flow: the next fetch is not sequential */
#define PK_F_IRQCHK 0x04   /* may unmask interrupts (CPSIE, MSR): re-check at next block */
#define PK_F_CONDNEXT 0x08 /* B<cond> whose target is its own fall-through address */
/* bits 7:4 of the flags hold the condition code of a B<cond> */

/* How an instruction moves an address register (docs/cycle-model.md, Alignment). */
enum {
    K_NONE = 0, /* touches no tracked address, writes registers in wmask */
    K_CLOBBER,  /* the registers in wmask become unknown */
    K_CONST,    /* rd = imm */
    K_ADDI,     /* rd = rn + imm */
    K_ADDR,     /* rd = rn + rm */
    K_ACCESS,   /* a word/halfword access at rn (+ rm) + imm, alignment mask amask */
    K_LITERAL   /* rd = the word at address imm (a literal load, before it is read) */
};

typedef struct {
    uint8_t kind;   /* K_* above */
    int8_t rd;      /* register written (K_CONST/K_ADDI/K_ADDR/K_LITERAL) */
    int8_t rn;      /* base register (K_ADDI/K_ADDR/K_ACCESS) */
    int8_t rm;      /* index register or -1 (K_ADDR/K_ACCESS) */
    int32_t imm;    /* constant, added immediate, access offset or literal address */
    uint16_t wmask; /* r0-r14 the instruction writes (PC is never tracked) */
    uint8_t amask;  /* K_ACCESS: alignment mask (1 halfword, 3 word) */
    uint8_t pad;
} pk_desc;

typedef struct {
    pk_desc desc;
    uint16_t cost;     /* cycles, flash wait states of the instruction's fetch included */
    uint8_t size;      /* bytes: 2 or 4 */
    uint8_t flags;     /* PK_F_* and the condition code */
    uint8_t undefined; /* 1: not an ARMv6-M instruction (UNDEFINED: HardFault) */
    uint8_t pad[3];
} pk_insn;

/* The core options that change what an instruction costs. */
typedef struct {
    uint32_t muls_cycles; /* 1 or 32 (DDI0432C table 3-1: a build option of the core) */
    uint32_t fetch_ws;    /* flash wait states per 32-bit fetch */
    uint32_t flash_base, flash_end;
} pk_rules;

/* Size in bytes of the instruction whose first halfword is hw1. */
static inline uint32_t pk_insn_size(uint32_t hw1) { return (hw1 >> 11) >= 0x1D ? 4 : 2; }

/* Decode the instruction at addr (hw2 is used only by 32-bit encodings). A literal
 * load comes back as K_LITERAL: the caller reads the word and resolves it. */
void pk_decode(uint32_t addr, uint32_t hw1, uint32_t hw2, const pk_rules *rules, pk_insn *out);

/* Turn a K_LITERAL description into K_CONST (the word could be read) or K_CLOBBER. */
void pk_resolve_literal(pk_desc *d, int readable, uint32_t word);

#endif
