/*
 * Where the fixed-window RSA code (src/rsa_win.c) keeps its operands in PKA RAM
 * (docs/xrsa.md, "Fixed-window images").
 *
 * Offsets and lengths in 32-bit words from the start of PKA RAM. W2_* is RSA-2048
 * (L = 32 words per prime, a window of 4 bits: a 16-entry table), W4_* RSA-4096
 * (L = 64, a window of 3 bits: 8 entries). The window is the largest whose table fits
 * beside the prime, y, R^2 and S_q in the 768 words: 4 + 2^w slots of L words, 20 of
 * 24 for RSA-2048 (w = 5 would need 36), all 12 of 12 for RSA-4096 (w = 4 would need 20).
 *
 * Phases, as in rsa_layout.h: the regions of each WIN*_PHASE_* string are live at the
 * same time and must be disjoint. rsa_win.c checks this with _Static_assert and
 * tests/test_xrsa_win.py reads this file and checks it again against the chip. Keep the
 * values plain decimal numbers.
 *
 * Inside the table, before it is built (crt_setup): T1 = 0, then T0 = R mod p = R - p,
 * T2 = m1 and T3 = m2 (the halves of m), T4 = m2 - p. After the exponentiation
 * (step 3): T0 = 1 or S_q - p, T1 = S_q R, then S_p R - S_q R, T2 = qinv.
 */
#ifndef PKASIM_RSA_WIN_LAYOUT_H
#define PKASIM_RSA_WIN_LAYOUT_H

#define WIN_RAM_WORDS 768       /* 3 KiB: configs/ciu98320b.yaml, peripherals.pka.ram_size */

/* ---- RSA-2048: L = 32, window 4 -------------------------------------------- */
#define W2_L          32
#define W2_WINDOW     4
#define W2_WINDOW_SRAM 5        /* xrsa_win_sram.elf: the table in SRAM, TAB holds scratch slots */
/* exponentiation, per prime */
#define W2_P          0         /* the prime */
#define W2_P_LEN      32
#define W2_Y          32        /* y; after step 3 h */
#define W2_Y_LEN      32
#define W2_RR         64        /* R^2 mod the prime */
#define W2_RR_LEN     32
#define W2_TAB        96        /* T[j] = m^j R mod the prime, j = 0..15, 32 words each */
#define W2_TAB_LEN    512
#define W2_SQ         608       /* S_q, from the end of the q exponentiation to step 4 */
#define W2_SQ_LEN     32
/* n = p*q (the range check, rsa_get_public_key) and M = S_q + h*q (step 4): one
 * product at LEN 64 modulo 2^2048 - 1 */
#define W2_MOD1       0         /* 2^2048 - 1 */
#define W2_MOD1_LEN   64
#define W2_XH         64        /* [x, 0]: p, or h */
#define W2_XH_LEN     64
#define W2_YQ         128       /* [q, 0] */
#define W2_YQ_LEN     64
#define W2_ACC        192       /* n, or M */
#define W2_ACC_LEN    64
#define W2_CW         256       /* a carry as an operand: [c, 0, ..., 0] */
#define W2_CW_LEN     32
#define W2_MM         320       /* the input m, then m - n */
#define W2_MM_LEN     64

/* ---- RSA-4096: L = 64, window 3 -------------------------------------------- */
#define W4_L          64
#define W4_WINDOW     3
#define W4_WINDOW_SRAM 4
#define W4_P          0
#define W4_P_LEN      64
#define W4_Y          64
#define W4_Y_LEN      64
#define W4_RR         128
#define W4_RR_LEN     64
#define W4_TAB        192       /* T[j], j = 0..7, 64 words each */
#define W4_TAB_LEN    512
#define W4_SQ         704
#define W4_SQ_LEN     64
/* n and M from four 1024x1024-bit products modulo 2^2048 - 1 (the paper's Table II) */
#define W4_MOD1       0
#define W4_MOD1_LEN   64
#define W4_T2         64        /* x1*y2, then x1*y2 + x2*y1 */
#define W4_T2_LEN     64
#define W4_T3         128       /* x2*y1 */
#define W4_T3_LEN     64
#define W4_CW         192
#define W4_CW_LEN     64
#define W4_XH         256       /* [LO(x), 0, HI(x), 0]: p, or h */
#define W4_XH_LEN     128
#define W4_YQ         384       /* [LO(q), 0, HI(q), 0] */
#define W4_YQ_LEN     128
#define W4_ACC        512       /* n, or M (4096 bits) */
#define W4_ACC_LEN    128
#define W4_MM         640       /* the input m, then m - n (before S_q exists) */
#define W4_MM_LEN     128

/* Regions live together, phase by phase. */
#define WIN_PHASE_W2_RANGE "W2_MOD1 W2_XH W2_YQ W2_ACC W2_MM"          /* n = p*q, m - n */
#define WIN_PHASE_W2_EXP   "W2_P W2_Y W2_RR W2_TAB W2_SQ"             /* per prime, and step 3 */
#define WIN_PHASE_W2_SPLIT "W2_Y W2_XH W2_SQ"                         /* h copied into XH */
#define WIN_PHASE_W2_M     "W2_MOD1 W2_XH W2_YQ W2_ACC W2_CW W2_SQ"   /* M = S_q + h*q */
#define WIN_PHASE_W4_RANGE "W4_MOD1 W4_T2 W4_T3 W4_CW W4_XH W4_YQ W4_ACC W4_MM"
#define WIN_PHASE_W4_EXP   "W4_P W4_Y W4_RR W4_TAB W4_SQ"
#define WIN_PHASE_W4_SPLIT "W4_Y W4_XH W4_SQ"
#define WIN_PHASE_W4_M     "W4_MOD1 W4_T2 W4_T3 W4_CW W4_XH W4_YQ W4_ACC W4_SQ"

/* ---- Build-time checks (used by rsa_win.c) --------------------------------- */
/* Region names are pasted onto _LEN, so they are written out, not macro-expanded. */
#define WIN_FITS(r)       (r + r##_LEN <= WIN_RAM_WORDS)
#define WIN_APART(a, b)   (a + a##_LEN <= b || b + b##_LEN <= a)

#endif
