/*
 * Where the RSA code keeps its operands in PKA RAM (docs/xrsa.md, "PKA RAM layout").
 *
 * Offsets and lengths are in 32-bit words from the start of PKA RAM; the driver
 * turns them into the byte pointers of docs/pka.md. Every region has room for the
 * longest operand put there (64 words = 2048 bits; 128 for the 4096-bit products);
 * an RSA-2048 operation uses the low 32 words of the 64-word slots.
 *
 * The RSA code runs in phases, and a region is reused once its phase is over. The
 * LAY_PHASE_* strings list the regions live at the same time in each phase: within
 * a phase they must be disjoint and inside PKA RAM. rsa.c checks this with
 * _Static_assert (LAY_CHECK_* below) and tests/test_xrsa.py checks it again from
 * this file and the chip description. Keep the values plain decimal numbers: the
 * tests and tests/xrsa_model.py read them from this file.
 */
#ifndef PKASIM_RSA_LAYOUT_H
#define PKASIM_RSA_LAYOUT_H

#define LAY_RAM_WORDS 768       /* 3 KiB: configs/ciu98320b.yaml, peripherals.pka.ram_size */

/* ---- Exponentiation, once per prime (Algorithms 2 and 3), and step 3 ---------- */
#define LAY_P         0         /* the prime: p or q (the modulus) */
#define LAY_P_LEN     64
#define LAY_RR        64        /* R^2 mod p */
#define LAY_RR_LEN    64
#define LAY_T         128       /* t; before it: R-1, s_1, m1; in step 3: qinv */
#define LAY_T_LEN     64
#define LAY_Y         192       /* y; then S_p, then h */
#define LAY_Y_LEN     64
#define LAY_DUM       256       /* the dummy of Algorithm 3; before it: m2; in step 3: S_p - S_q */
#define LAY_DUM_LEN   64
#define LAY_ONE       320       /* the constant 1 */
#define LAY_ONE_LEN   64
#define LAY_SQ        640       /* S_q, from the end of the q exponentiation to step 4 */
#define LAY_SQ_LEN    64
#define LAY_RED       384       /* strict PKA only: m2 - p, then S_q - p (an operand reduced below p) */
#define LAY_RED_LEN   64

/* ---- Step 4: S = S_q + h*q from products modulo 2^2048 - 1 (Table II) ------- */
#define LAY_MOD1      0         /* 2^2048 - 1, the modulus that makes MONTMUL a plain product */
#define LAY_MOD1_LEN  64
#define LAY_T2        64        /* x1*y2, then x1*y2 + x2*y1 */
#define LAY_T2_LEN    64
#define LAY_T3        128       /* x2*y1 */
#define LAY_T3_LEN    64
#define LAY_CW        192       /* a carry or borrow as an operand: [c, 0, ..., 0] */
#define LAY_CW_LEN    64
#define LAY_XH        256       /* [LO(x), 0, HI(x), 0], x = h (then p); at the end D = M - N */
#define LAY_XH_LEN    128
#define LAY_YQ        384       /* [LO(q), 0, HI(q), 0] */
#define LAY_YQ_LEN    128
#define LAY_ACC       512       /* M = S_q + h*q (4096 bits) */
#define LAY_ACC_LEN   128
#define LAY_NACC      640       /* N = p*q (paper variant: equation 3; rsa_get_public_key) */
#define LAY_NACC_LEN  128

/* ---- Step 4 and equation (3) on a 4096-bit multiplier (MAXLEN >= 128) ------
 * rsa.c takes this path for RSA-4096 when the PKA reports MAXLEN >= 128 and
 * RAMSIZE >= LAY_NAT_RAM_WORDS (configs/native4096.yaml; docs/xrsa.md, "A chip with a
 * native 4096-bit multiplier"): one LEN-128 MONTMUL modulo 2^4096 - 1 makes h*q (and
 * p*q) whole. The exponentiation before it keeps the layout above (LEN 64). Every
 * region is 128 words; the layout needs no more than the 3 KiB above, so any chip
 * that can run the exponentiation has room for it. */
#define LAY_NAT_RAM_WORDS 768   /* PKA RAM the native path needs (checked against RAMSIZE) */
#define LAY_NAT_MOD      0      /* 2^4096 - 1 */
#define LAY_NAT_MOD_LEN  128
#define LAY_NAT_N        128    /* N = p*q (paper variant; rsa_get_public_key); Y is dead by then */
#define LAY_NAT_N_LEN    128
#define LAY_NAT_X        256    /* h zero-extended (copied from Y), then p; at the end D = M - N */
#define LAY_NAT_X_LEN    128
#define LAY_NAT_Y        384    /* q zero-extended */
#define LAY_NAT_Y_LEN    128
#define LAY_NAT_ACC      512    /* M = S_q + h*q */
#define LAY_NAT_ACC_LEN  128
#define LAY_NAT_SQ       640    /* S_q zero-extended: SQ above, its top 64 words zeroed */
#define LAY_NAT_SQ_LEN   128

/* Regions live together, phase by phase. */
#define LAY_PHASE_EXP   "P RR T Y DUM ONE SQ RED"          /* Algorithms 2 and 3, step 3 */
#define LAY_PHASE_SPLIT "Y XH"                             /* h copied from Y into XH */
#define LAY_PHASE_M     "MOD1 T2 T3 CW XH YQ ACC SQ"       /* M = S_q + h*q */
#define LAY_PHASE_N     "MOD1 T2 T3 CW XH YQ ACC NACC"     /* N = p*q next to M */
#define LAY_PHASE_D     "CW XH ACC NACC"                   /* D = M - N into XH */
/* The native path (MAXLEN >= 128) instead of SPLIT, M, N and D: */
#define LAY_PHASE_NAT_SPLIT "Y SQ NAT_MOD NAT_X NAT_Y"          /* h from Y into NAT_X; 2^4096 - 1, q */
#define LAY_PHASE_NAT_M     "NAT_MOD NAT_X NAT_Y NAT_ACC NAT_SQ" /* M = h*q + S_q */
#define LAY_PHASE_NAT_N     "NAT_MOD NAT_X NAT_Y NAT_ACC NAT_N"  /* N = p*q next to M */
#define LAY_PHASE_NAT_D     "NAT_X NAT_ACC NAT_N"               /* D = M - N into NAT_X */

/* ---- Build-time checks (used by rsa.c) ------------------------------------- */
#define LAY_END(r)          (LAY_##r + LAY_##r##_LEN)
#define LAY_FITS(r)         (LAY_END(r) <= LAY_RAM_WORDS)
#define LAY_NAT_FITS(r)     (LAY_END(r) <= LAY_NAT_RAM_WORDS)
#define LAY_APART(a, b)     (LAY_END(a) <= LAY_##b || LAY_END(b) <= LAY_##a)

#define LAY_CHECK_FITS                                                          \
    _Static_assert(LAY_FITS(P) && LAY_FITS(RR) && LAY_FITS(T) && LAY_FITS(Y) &&  \
                   LAY_FITS(DUM) && LAY_FITS(ONE) && LAY_FITS(SQ) &&             \
                   LAY_FITS(MOD1) && LAY_FITS(T2) && LAY_FITS(T3) &&             \
                   LAY_FITS(CW) && LAY_FITS(XH) && LAY_FITS(YQ) &&               \
                   LAY_FITS(ACC) && LAY_FITS(NACC),                              \
                   "an RSA operand region runs past the end of PKA RAM")

#define LAY_CHECK_EXP                                                           \
    _Static_assert(LAY_APART(P, RR) && LAY_APART(P, T) && LAY_APART(P, Y) &&     \
                   LAY_APART(P, DUM) && LAY_APART(P, ONE) && LAY_APART(P, SQ) && \
                   LAY_APART(RR, T) && LAY_APART(RR, Y) && LAY_APART(RR, DUM) && \
                   LAY_APART(RR, ONE) && LAY_APART(RR, SQ) &&                    \
                   LAY_APART(T, Y) && LAY_APART(T, DUM) && LAY_APART(T, ONE) &&  \
                   LAY_APART(T, SQ) && LAY_APART(Y, DUM) && LAY_APART(Y, ONE) && \
                   LAY_APART(Y, SQ) && LAY_APART(DUM, ONE) &&                    \
                   LAY_APART(DUM, SQ) && LAY_APART(ONE, SQ),                     \
                   "PKA RAM layout: exponentiation regions overlap")

#define LAY_CHECK_RED                                                           \
    _Static_assert(LAY_FITS(RED) && LAY_APART(RED, P) && LAY_APART(RED, RR) &&   \
                   LAY_APART(RED, T) && LAY_APART(RED, Y) && LAY_APART(RED, DUM) && \
                   LAY_APART(RED, ONE) && LAY_APART(RED, SQ),                    \
                   "PKA RAM layout: RED overlaps an exponentiation region")

#define LAY_CHECK_M                                                             \
    _Static_assert(LAY_APART(Y, XH) &&                                          \
                   LAY_APART(MOD1, T2) && LAY_APART(MOD1, T3) &&                 \
                   LAY_APART(MOD1, CW) && LAY_APART(MOD1, XH) &&                 \
                   LAY_APART(MOD1, YQ) && LAY_APART(MOD1, ACC) &&                \
                   LAY_APART(MOD1, SQ) && LAY_APART(MOD1, NACC) &&               \
                   LAY_APART(T2, T3) && LAY_APART(T2, CW) && LAY_APART(T2, XH) && \
                   LAY_APART(T2, YQ) && LAY_APART(T2, ACC) && LAY_APART(T2, SQ) && \
                   LAY_APART(T2, NACC) &&                                        \
                   LAY_APART(T3, CW) && LAY_APART(T3, XH) && LAY_APART(T3, YQ) && \
                   LAY_APART(T3, ACC) && LAY_APART(T3, SQ) && LAY_APART(T3, NACC) && \
                   LAY_APART(CW, XH) && LAY_APART(CW, YQ) && LAY_APART(CW, ACC) && \
                   LAY_APART(CW, SQ) && LAY_APART(CW, NACC) &&                   \
                   LAY_APART(XH, YQ) && LAY_APART(XH, ACC) && LAY_APART(XH, SQ) && \
                   LAY_APART(XH, NACC) &&                                        \
                   LAY_APART(YQ, ACC) && LAY_APART(YQ, SQ) && LAY_APART(YQ, NACC) && \
                   LAY_APART(ACC, SQ) && LAY_APART(ACC, NACC),                   \
                   "PKA RAM layout: step 4 regions overlap")

#define LAY_CHECK_NAT                                                           \
    _Static_assert(LAY_NAT_FITS(NAT_MOD) && LAY_NAT_FITS(NAT_N) &&               \
                   LAY_NAT_FITS(NAT_X) && LAY_NAT_FITS(NAT_Y) &&                 \
                   LAY_NAT_FITS(NAT_ACC) && LAY_NAT_FITS(NAT_SQ) &&              \
                   LAY_NAT_FITS(Y) && LAY_NAT_FITS(SQ),                          \
                   "a native-path region runs past LAY_NAT_RAM_WORDS");          \
    _Static_assert(LAY_APART(Y, SQ) && LAY_APART(Y, NAT_MOD) &&                  \
                   LAY_APART(Y, NAT_X) && LAY_APART(Y, NAT_Y) &&                 \
                   LAY_APART(SQ, NAT_MOD) && LAY_APART(SQ, NAT_X) &&             \
                   LAY_APART(SQ, NAT_Y) &&                                       \
                   LAY_APART(NAT_MOD, NAT_X) && LAY_APART(NAT_MOD, NAT_Y) &&     \
                   LAY_APART(NAT_MOD, NAT_ACC) && LAY_APART(NAT_MOD, NAT_SQ) &&  \
                   LAY_APART(NAT_MOD, NAT_N) &&                                  \
                   LAY_APART(NAT_X, NAT_Y) && LAY_APART(NAT_X, NAT_ACC) &&       \
                   LAY_APART(NAT_X, NAT_SQ) && LAY_APART(NAT_X, NAT_N) &&        \
                   LAY_APART(NAT_Y, NAT_ACC) && LAY_APART(NAT_Y, NAT_SQ) &&      \
                   LAY_APART(NAT_Y, NAT_N) &&                                    \
                   LAY_APART(NAT_ACC, NAT_SQ) && LAY_APART(NAT_ACC, NAT_N),      \
                   "PKA RAM layout: native-path regions overlap");               \
    _Static_assert(LAY_NAT_SQ == LAY_SQ && LAY_NAT_SQ_LEN == 2 * LAY_SQ_LEN,     \
                   "NAT_SQ is SQ zero-extended in place")

#endif
