/*
 * RSA-2048 and RSA-4096 private-key operations on the 2048-bit PKA, faster than the
 * xRSA variants of rsa.c and still constant-time (docs/xrsa.md, "Fixed-window images").
 * tests/xrsa_win_model.py is the same sequence of PKA operations in Python.
 *
 * The structure is rsa.c's optimized variant: CRT with m^dq mod q first, then
 * m^dp mod p kept in Montgomery form, h = qinv (S_p - S_q) mod p in the Montgomery
 * domain, M = S_q + h*q from products modulo 2^2048 - 1 (Table II). What changes:
 *
 *   - exponentiation by a fixed window of w bits, left to right: w squarings and one
 *     multiplication by a table entry T[window] = m^window R per window, whatever its
 *     value (T[0] = R, a multiplication by one), so 1 + 1/w MONTMULs per exponent bit
 *     instead of Algorithm 3's 2. The table lives in PKA RAM: w = 4 (16 entries) for
 *     RSA-2048, w = 3 (8 entries) for RSA-4096, the largest that fit (rsa_win_layout.h);
 *   - PKA operations chained by polling SR.BUSY instead of one interrupt each
 *     (pka_poll.h), and the squarings of a window rewrite no pointer;
 *   - R^2 mod p from R mod p by L/4 modular doublings and 7 squarings (2^(L/4 * 2^7) R =
 *     2^(32L) R): 7 MONTMULs instead of 10 or 11;
 *   - R mod p = R - p by one SUB (0 - p, wrapping), not (R - 1) (+) 1;
 *   - every operand of a modular operation is below its modulus, so the code is right
 *     on a PKA with strict_operands (docs/pka.md): m2 and S_q are reduced by one
 *     subtraction of p chosen by the borrow (both are below 2p);
 *   - the input must be below n (RSASP1 / RSADP step 1): n = p*q is computed first and
 *     an input m >= n returns RSA_ERR_INPUT with no output.
 *
 * Constant time: the sequence of PKA operations, their lengths, the CPU's instructions
 * and the addresses the CPU reads and writes depend on nbits only. The exponent's
 * window selects the table entry through the value written to BPTR (an address
 * computed by arithmetic, never a table lookup or a branch): the PKA reads its
 * operand at a key-dependent offset of its own RAM, as Algorithm 3's dummy pointer
 * does in rsa.c, and its busy time depends on the operation and LEN only.
 */
#include "rsa.h"
#include "pka.h"
#include "pka_poll.h"
#include "rsa_win_layout.h"

#ifndef RSA_TABLE_SRAM
#define RSA_TABLE_SRAM 0
#endif
#ifndef RSA_PAIR
#define RSA_PAIR 0
#endif
#if RSA_PAIR && RSA_TABLE_SRAM
#error "RSA_PAIR uses the table in PKA RAM"
#endif

#if RSA_TABLE_SRAM
/*
 * The table in SRAM (xrsa_win_sram.elf, docs/xrsa.md "Table in PKA RAM or in SRAM"):
 * a window one bit wider than PKA RAM allows, 5 for RSA-2048 (32 entries of 32 words)
 * and 4 for RSA-4096 (16 of 64 words), 4 KiB either way. Each entry is made in PKA
 * RAM and fetched; before each multiplication the CPU selects the window's entry by
 * reading every entry under a mask (no address depends on the exponent), a share of
 * the entries during each of the window's squarings, and copies the result into the
 * SEL slot of PKA RAM.
 */
const char rsa_variant[] = "fixed-window, SRAM table";
#define W2_WIN W2_WINDOW_SRAM
#define W4_WIN W4_WINDOW_SRAM
#define SRAM_TAB_WORDS 1024u
_Static_assert((1u << W2_WINDOW_SRAM) * W2_L <= SRAM_TAB_WORDS &&
               (1u << W4_WINDOW_SRAM) * W4_L <= SRAM_TAB_WORDS, "the SRAM table holds both sizes");
_Static_assert(5 * W2_L <= W2_TAB_LEN && 5 * W4_L <= W4_TAB_LEN, "five scratch slots in TAB");
static uint32_t sram_tab[SRAM_TAB_WORDS];
static uint32_t sram_sel[64];
#elif RSA_PAIR
/*
 * xrsa_pair.elf (docs/xrsa.md, "The parallel pair"): on a PKA with CAPS.PAIR (Victor's
 * two multiplications in parallel, docs/pka.md) the exponentiation is Victor's
 * Algorithm 1, right to left, one MONTMUL2 per exponent bit; on any other PKA the
 * fixed window, as xrsa_win.elf.
 */
const char rsa_variant[] = "fixed-window, or the parallel pair when the PKA has it";
#define W2_WIN W2_WINDOW
#define W4_WIN W4_WINDOW
static uint32_t pair_on;                    /* this run's PKA has CAPS.PAIR */
#else
const char rsa_variant[] = "fixed-window";
#define W2_WIN W2_WINDOW
#define W4_WIN W4_WINDOW
#endif

#define WIDE 64u                /* LEN of the products modulo 2^2048 - 1 */
#define HALF 32u
#define R2_SQUARINGS 7u         /* R^2 = 2^(L/4) R squared 7 times */

#define TRY(call) do { int rc_ = (call); if (rc_ < 0) return rc_; } while (0)

/* ---- layout checks ----------------------------------------------------------- */
#define WIN_CHECK_SIZE(X)                                                        \
    _Static_assert(X##_TAB_LEN == (1 << X##_WINDOW) * X##_L &&                   \
                   X##_P_LEN == X##_L && X##_Y_LEN == X##_L &&                   \
                   X##_RR_LEN == X##_L && X##_SQ_LEN == X##_L &&                 \
                   X##_XH_LEN == 2 * X##_L && X##_YQ_LEN == 2 * X##_L &&         \
                   X##_ACC_LEN == 2 * X##_L && X##_MM_LEN == 2 * X##_L &&        \
                   X##_MOD1_LEN == WIDE && X##_CW_LEN == X##_L &&                \
                   X##_L / 4 * (1 << R2_SQUARINGS) == 32 * X##_L,                \
                   #X ": region sizes follow L and the window")
#define WIN_CHECK_EXP(X)                                                         \
    _Static_assert(WIN_FITS(X##_P) && WIN_FITS(X##_Y) && WIN_FITS(X##_RR) &&    \
                   WIN_FITS(X##_TAB) && WIN_FITS(X##_SQ) &&                      \
                   WIN_APART(X##_P, X##_Y) && WIN_APART(X##_P, X##_RR) &&        \
                   WIN_APART(X##_P, X##_TAB) && WIN_APART(X##_P, X##_SQ) &&      \
                   WIN_APART(X##_Y, X##_RR) && WIN_APART(X##_Y, X##_TAB) &&      \
                   WIN_APART(X##_Y, X##_SQ) && WIN_APART(X##_RR, X##_TAB) &&     \
                   WIN_APART(X##_RR, X##_SQ) && WIN_APART(X##_TAB, X##_SQ) &&    \
                   WIN_APART(X##_Y, X##_XH) && WIN_APART(X##_SQ, X##_XH),        \
                   #X ": exponentiation regions overlap or run past PKA RAM")
#define WIN_CHECK_WIDE(X)                                                        \
    _Static_assert(WIN_FITS(X##_MOD1) && WIN_FITS(X##_XH) && WIN_FITS(X##_YQ) && \
                   WIN_FITS(X##_ACC) && WIN_FITS(X##_CW) && WIN_FITS(X##_MM) &&  \
                   WIN_APART(X##_MOD1, X##_XH) && WIN_APART(X##_MOD1, X##_YQ) && \
                   WIN_APART(X##_MOD1, X##_ACC) && WIN_APART(X##_MOD1, X##_CW) && \
                   WIN_APART(X##_MOD1, X##_SQ) && WIN_APART(X##_XH, X##_YQ) &&   \
                   WIN_APART(X##_XH, X##_ACC) && WIN_APART(X##_XH, X##_CW) &&    \
                   WIN_APART(X##_XH, X##_SQ) && WIN_APART(X##_YQ, X##_ACC) &&    \
                   WIN_APART(X##_YQ, X##_CW) && WIN_APART(X##_YQ, X##_SQ) &&     \
                   WIN_APART(X##_ACC, X##_CW) && WIN_APART(X##_ACC, X##_SQ) &&   \
                   WIN_APART(X##_CW, X##_SQ) &&                                  \
                   WIN_APART(X##_MM, X##_MOD1) && WIN_APART(X##_MM, X##_XH) &&   \
                   WIN_APART(X##_MM, X##_YQ) && WIN_APART(X##_MM, X##_ACC) &&    \
                   WIN_APART(X##_MM, X##_CW),                                    \
                   #X ": product regions overlap or run past PKA RAM")
WIN_CHECK_SIZE(W2);
WIN_CHECK_SIZE(W4);
WIN_CHECK_EXP(W2);
WIN_CHECK_EXP(W4);
WIN_CHECK_WIDE(W2);
WIN_CHECK_WIDE(W4);
/* Table II's extra products (RSA-4096 only). */
_Static_assert(WIN_FITS(W4_T2) && WIN_FITS(W4_T3) &&
               WIN_APART(W4_T2, W4_T3) && WIN_APART(W4_T2, W4_MOD1) && WIN_APART(W4_T2, W4_CW) &&
               WIN_APART(W4_T2, W4_XH) && WIN_APART(W4_T2, W4_YQ) && WIN_APART(W4_T2, W4_ACC) &&
               WIN_APART(W4_T2, W4_SQ) && WIN_APART(W4_T2, W4_MM) &&
               WIN_APART(W4_T3, W4_MOD1) && WIN_APART(W4_T3, W4_CW) && WIN_APART(W4_T3, W4_XH) &&
               WIN_APART(W4_T3, W4_YQ) && WIN_APART(W4_T3, W4_ACC) && WIN_APART(W4_T3, W4_SQ) &&
               WIN_APART(W4_T3, W4_MM), "W4: Table II regions overlap");
_Static_assert(WIN_RAM_WORDS <= PKA_RAM_WORDS, "the layout needs more PKA RAM than the chip has");
_Static_assert(WIDE <= PKA_MAX_WORDS, "products modulo 2^2048 - 1 need LEN 64");

typedef struct {
    uint16_t L, window;                     /* words per prime, window bits */
    uint16_t p, y, rr, tab, sq;             /* exponentiation */
    uint16_t mod1, xh, yq, acc, cw, mm;     /* products modulo 2^2048 - 1, range check */
    uint16_t t2, t3;                        /* Table II (RSA-4096) */
} win_layout_t;

static const win_layout_t LAYOUT_2048 = {
    W2_L, W2_WIN, W2_P, W2_Y, W2_RR, W2_TAB, W2_SQ,
    W2_MOD1, W2_XH, W2_YQ, W2_ACC, W2_CW, W2_MM, 0, 0,
};
static const win_layout_t LAYOUT_4096 = {
    W4_L, W4_WIN, W4_P, W4_Y, W4_RR, W4_TAB, W4_SQ,
    W4_MOD1, W4_XH, W4_YQ, W4_ACC, W4_CW, W4_MM, W4_T2, W4_T3,
};

static const win_layout_t *layout_for(uint16_t nbits)
{
    if (nbits == 2048)
        return &LAYOUT_2048;
    if (nbits == 4096)
        return &LAYOUT_4096;
    return 0;
}

/*
 * x, hidden from the optimizer: a mask derived from a secret stays a mask. Without
 * it clang sees that a mask is 0 or all ones and may branch on it (it did, in the SRAM
 * table's selection: a compare of the window with the entry number and a skip).
 */
static inline uint32_t value_barrier(uint32_t x)
{
    __asm__ volatile("" : "+r"(x));
    return x;
}

/* Pick region a if borrow = 1, b if borrow = 0: arithmetic, no branch. */
static inline uint32_t pick(uint32_t borrow, uint32_t a, uint32_t b)
{
    return b ^ ((a ^ b) & value_barrier(0u - borrow));
}

#if RSA_TABLE_SRAM
/* `words` words of PKA RAM at off into SRAM, once the PKA is idle. */
static void fetch_words(uint32_t *dst, uint32_t off, uint32_t words)
{
    volatile uint32_t *s = PKA_RAM + off;

    pkp_wait();
    for (uint32_t i = 0; i < words; i++)
        dst[i] = s[i];
}
#endif

/* ---- products modulo 2^2048 - 1 (Table II) ---------------------------------- */

/* [LO(x), 0, HI(x), 0] (RSA-4096) or [x, 0] (RSA-2048) at dst, from a big-endian
 * key field of 4L bytes. */
static void split_load(const win_layout_t *ly, uint32_t dst, const uint8_t *be)
{
    if (ly->L == 64u) {
        pka_load_be(dst, be + 4u * HALF, HALF);
        pka_fill(dst + HALF, 0, HALF);
        pka_load_be(dst + 2u * HALF, be, HALF);
        pka_fill(dst + 3u * HALF, 0, HALF);
    } else {
        pka_load_be(dst, be, HALF);
        pka_fill(dst + HALF, 0, HALF);
    }
}

/* The same from an L-word value in PKA RAM. */
static void split_copy(const win_layout_t *ly, uint32_t dst, uint32_t src)
{
    pka_copy(dst, src, HALF);
    pka_fill(dst + HALF, 0, HALF);
    if (ly->L == 64u) {
        pka_copy(dst + 2u * HALF, src + HALF, HALF);
        pka_fill(dst + 3u * HALF, 0, HALF);
    }
}

/*
 * ACC = x * q, x split in XH and q in YQ. Modulo 2^2048 - 1, R = 2^2048 = 1, so
 * a (x) b = a*b for a, b < 2^1024 (docs/xrsa.md, step 4). RSA-2048: one product;
 * RSA-4096: four and three additions, as rsa.c's wide_mul.
 */
static int wide_mul(const win_layout_t *ly)
{
    const uint32_t x2 = ly->xh, x1 = ly->xh + 2u * HALF;
    const uint32_t y2 = ly->yq, y1 = ly->yq + 2u * HALF;
    const uint32_t acc = ly->acc;

    pkp_config(WIDE, ly->mod1);
    pkp_run(PKA_MONTMUL, x2, y2, acc);
    if (ly->L != 64u)
        return RSA_OK;
    pkp_run(PKA_MONTMUL, x1, y1, acc + WIDE);
    pkp_run(PKA_MONTMUL, x1, y2, ly->t2);
    pkp_run(PKA_MONTMUL, x2, y1, ly->t3);
    pkp_run(PKA_ADD, ly->t2, ly->t3, ly->t2);                   /* x1 y2 + x2 y1 */
    uint32_t c = pkp_carry();                                   /* weight 2^3072 */
    pkp_run(PKA_ADD, acc + HALF, ly->t2, acc + HALF);
    c += pkp_carry();
    pka_write(ly->cw, c);
    pkp_config(HALF, ly->mod1);
    pkp_run(PKA_ADD, acc + 3u * HALF, ly->cw, acc + 3u * HALF);
    c = pkp_carry();
    pka_write(ly->cw, 0);
    return c ? RSA_ERR_CARRY : RSA_OK;
}

/* n = p*q into ACC (2L words); CW zeroed. */
static int public_n(const win_layout_t *ly, const rsa_key_t *key)
{
    pkp_wait();
    pka_fill(ly->mod1, 0xFFFFFFFFu, WIDE);
    pka_fill(ly->cw, 0, ly->L);
    split_load(ly, ly->xh, key->p);
    split_load(ly, ly->yq, key->q);
    TRY(wide_mul(ly));
    return pkp_errors();
}

/*
 * RSASP1 / RSADP step 1: RSA_OK if the input (2L words big-endian) is below n, in
 * ACC; RSA_ERR_INPUT if not. m - n by SUB at LEN 64 (twice, with the borrow carried
 * through CW, for RSA-4096): a final borrow means m < n.
 */
static int below_n(const win_layout_t *ly, const uint8_t *in)
{
    const uint32_t mm = ly->mm, acc = ly->acc;
    uint32_t borrow;

    pkp_wait();
    pka_load_be(mm, in, 2u * ly->L);
    pkp_config(WIDE, ly->mod1);
    pkp_run(PKA_SUB, mm, acc, mm);
    borrow = pkp_carry();
    if (ly->L == 64u) {
        pka_write(ly->cw, borrow);
        pkp_run(PKA_SUB, mm + WIDE, acc + WIDE, mm + WIDE);
        borrow = pkp_carry();
        pkp_run(PKA_SUB, mm + WIDE, ly->cw, mm + WIDE);
        borrow |= pkp_carry();
        pka_write(ly->cw, 0);
    }
    TRY(pkp_errors());
    return borrow ? RSA_OK : RSA_ERR_INPUT;
}

/* ---- the exponentiation modulo one prime ----------------------------------- */

/*
 * Bits [bit, bit + w) of the exponent d (nbytes bytes, big-endian); bits past the top
 * read as 0. The bytes read depend on the position only.
 */
static inline uint32_t window(const uint8_t *d, uint32_t nbytes, uint32_t bit, uint32_t w)
{
    uint32_t j = bit >> 3;                          /* byte from the least significant end */
    uint32_t v = d[nbytes - 1u - j];

    if (j + 1u < nbytes)                            /* depends on the position only */
        v |= (uint32_t)d[nbytes - 2u - j] << 8;
    return (v >> (bit & 7u)) & ((1u << w) - 1u);
}

/*
 * R^2 mod p into RR and the table T[j] = m^j R mod p (j = 0 .. 2^w - 1), with the
 * prime (L words, big-endian) into P and m (2L words) read from `m`. Leaves LEN = L
 * and N = P configured. 7 + 2 + 2^w - 2 MONTMULs.
 */
static void crt_setup(const win_layout_t *ly, const uint8_t *prime, const uint8_t *m)
{
    const uint32_t L = ly->L, p = ly->p, rr = ly->rr;
    const uint32_t t0 = ly->tab, t1 = t0 + L, t2 = t1 + L, t3 = t2 + L, t4 = t3 + L;

    pkp_wait();
    pka_load_be(p, prime, L);
    pka_fill(t1, 0, L);
    pka_load_be(t2, m, L);                              /* m1: m = m1 R + m2 */
    pka_load_be(t3, m + 4u * L, L);                     /* m2 */
    pkp_config(L, p);
    pkp_run(PKA_SUB, t3, p, t4);                        /* m2 - p */
    uint32_t m2 = pick(pkp_carry(), t3, t4);            /* m2 mod p (m2 < R < 2p) */
    pkp_run(PKA_SUB, t1, p, t0);                        /* 0 - p = R - p = R mod p */
    pkp_run(PKA_MODADD, t0, t0, rr);                    /* 2R */
    for (uint32_t i = 1; i < L / 4u; i++)
        pkp_run(PKA_MODADD, rr, rr, rr);                /* 2^(L/4) R */
    for (uint32_t i = 0; i < R2_SQUARINGS; i++)
        pkp_run(PKA_MONTMUL, rr, rr, rr);               /* 2^(2k) R from 2^k R; finally R^2 */
    pkp_run(PKA_MONTMUL, t2, rr, t1);                   /* m1 R (m1 < p as m < n) */
    pkp_run(PKA_MODADD, t1, m2, t1);                    /* m mod p */
    pkp_run(PKA_MONTMUL, t1, rr, t1);                   /* T1 = m R */
#if RSA_TABLE_SRAM
    /* T[j] = T[j-1] (x) T1 in T2 and T3 in turn, each fetched into the SRAM table. */
    fetch_words(sram_tab, t0, L);
    fetch_words(sram_tab + L, t1, L);
    uint32_t prev = t1;
    for (uint32_t j = 2; j < 1u << ly->window; j++) {
        uint32_t dst = j & 1u ? t3 : t2;
        pkp_run(PKA_MONTMUL, prev, t1, dst);
        fetch_words(sram_tab + j * L, dst, L);
        prev = dst;
    }
#else
#if RSA_PAIR
    if (pair_on)
        return;                                         /* T0 = R mod p and T1 = m R are all it needs */
#endif
    for (uint32_t j = 2; j < 1u << ly->window; j++)
        pkp_run(PKA_MONTMUL, t0 + (j - 1u) * L, t1, t0 + j * L);    /* T[j] = T[j-1] (x) T1 */
#endif
}

#if !RSA_TABLE_SRAM
/*
 * y = m^d R mod p into Y, from the table: the top window's entry, then per window w
 * squarings and one multiplication by T[window]. LEN and N as crt_setup left them.
 * Inlined with w a constant, so the squarings of a window are straight-line code:
 * each waits and writes CR alone (A = B = R = Y stay); a window's multiplication
 * writes BPTR (its entry) and the next squaring BPTR again (Y).
 */
static inline __attribute__((always_inline)) void crt_pow(const win_layout_t *ly, const uint8_t *d, const uint32_t w)
{
    const uint32_t L = ly->L, nbytes = 4u * L, stride = 4u * L;
    const uint32_t nwin = (32u * L + w - 1u) / w;
    const uint32_t y = 4u * ly->y, tab = 4u * ly->tab;
    const uint32_t cr = PKP_CR(PKA_MONTMUL);
    uint32_t e = tab + stride * window(d, nbytes, w * (nwin - 1u), w);

    pkp_wait();
    PKA_APTR = e;                                       /* y = T[top] (x) T[top] */
    PKA_BPTR = e;
    PKA_RPTR = y;
    PKA_CR = cr;
    e = tab + stride * window(d, nbytes, w * (nwin - 2u), w);
    pkp_wait();
    PKA_APTR = y;
    PKA_BPTR = y;
    PKA_CR = cr;
    for (uint32_t s = 2; s < w + 0u; s++) {
        pkp_wait();
        PKA_CR = cr;
    }
    pkp_wait();
    PKA_BPTR = e;                                       /* y = y (x) T[window] */
    PKA_CR = cr;
    for (uint32_t k = nwin - 2u; k-- > 0;) {
        pkp_wait();
        PKA_BPTR = y;                                   /* first squaring */
        PKA_CR = cr;
        e = tab + stride * window(d, nbytes, w * k, w); /* while it runs */
        __asm__ volatile("" : "+r"(e));                 /* (in a register, not recomputed after the wait) */
        for (uint32_t s = 1; s < w; s++) {
            pkp_wait();
            PKA_CR = cr;
        }
        pkp_wait();
        PKA_BPTR = e;
        PKA_CR = cr;
    }
}
#endif

#if RSA_TABLE_SRAM
/* All ones if j = idx, else 0: arithmetic on the secret, no branch. The barrier sits
 * on the 0/1 value: placed on the mask, it let Clang make the mask with a branch on
 * the secret (cmp; bne; mvns), which pkasim ct-check found (docs/ct-check.md). */
static inline uint32_t eq_mask(uint32_t j, uint32_t idx)
{
    uint32_t t = value_barrier(j ^ idx);
    uint32_t nonzero = value_barrier((t | (0u - t)) >> 31);

    return nonzero - 1u;
}

/*
 * Entries j0 .. j1-1 of the SRAM table into sram_sel under their masks: sel = T[idx]
 * once every entry has been through (sel starts as entry j0 masked when j0 = 0). Every
 * entry is read, whatever idx; the loops depend on j0, j1 and L only.
 */
static void select_entries(uint32_t L, uint32_t j0, uint32_t j1, uint32_t idx)
{
    uint32_t *sel = sram_sel;

    for (uint32_t j = j0; j < j1; j++) {
        const uint32_t *e = sram_tab + j * L;
        uint32_t mask = eq_mask(j, idx);
        if (j == 0) {                                   /* public: the first entry */
            for (uint32_t i = 0; i < L; i++)
                sel[i] = e[i] & mask;
        } else {
            for (uint32_t i = 0; i < L; i++)
                sel[i] |= e[i] & mask;
        }
    }
}

/* sram_sel into the SEL slot (the PKA idle). */
static void sel_to_pka(uint32_t L, uint32_t off)
{
    volatile uint32_t *d = PKA_RAM + off;

    for (uint32_t i = 0; i < L; i++)
        d[i] = sram_sel[i];
}

/*
 * As crt_pow, with the entry of each multiplication selected from the SRAM table: the
 * 2^w entries are split over the window's w squarings (entries s 2^w / w up to
 * (s + 1) 2^w / w during squaring s), then SEL gets the selection and the
 * multiplication reads it. The first squaring reads T[top] from SEL.
 */
static inline __attribute__((always_inline)) void crt_pow_sram(const win_layout_t *ly, const uint8_t *d,
                                                               const uint32_t w)
{
    const uint32_t L = ly->L, nbytes = 4u * L, entries = 1u << w;
    const uint32_t nwin = (32u * L + w - 1u) / w;
    const uint32_t y = 4u * ly->y, sel = ly->tab + 4u * L;      /* SEL = T4, free after crt_setup */
    const uint32_t cr = PKP_CR(PKA_MONTMUL);

    select_entries(L, 0, entries, window(d, nbytes, w * (nwin - 1u), w));
    pkp_wait();
    sel_to_pka(L, sel);
    PKA_APTR = 4u * sel;                                        /* y = T[top] (x) T[top] */
    PKA_BPTR = 4u * sel;
    PKA_RPTR = y;
    PKA_CR = cr;
    for (uint32_t k = nwin - 1u; k-- > 0;) {
        uint32_t idx = window(d, nbytes, w * k, w);
        for (uint32_t s = 0; s < w; s++) {
            if (s != 0 || k != nwin - 2u) {                     /* public: the first squaring is running */
                pkp_wait();
                PKA_APTR = y;
                PKA_BPTR = y;
                PKA_CR = cr;
            }
            select_entries(L, s * entries / w, (s + 1u) * entries / w, idx);
        }
        pkp_wait();
        sel_to_pka(L, sel);
        PKA_BPTR = 4u * sel;                                    /* y = y (x) T[window] */
        PKA_CR = cr;
    }
}
#endif

#if RSA_PAIR
/*
 * y = m^d R mod p into Y by Victor's Algorithm 1 with its two multiplications in
 * parallel: for each bit e_i of d, least significant first, one MONTMUL2 computes
 * Z = X (x) M and M = M (x) M together (B = A2 = R2 = M, the common operand), and X
 * becomes Z when e_i = 1. X starts as T0 = R mod p (1 in Montgomery form), M as T1 =
 * m R. Every bit costs one MONTMUL2 whatever its value; the bit only chooses, by a
 * mask, which of two slots the next operation reads as X and writes as Z (as the
 * window chooses BPTR in crt_pow). 32 L operations; then Y = X + 0 (M cleared first).
 */
static void crt_pow_pair(const win_layout_t *ly, const uint8_t *d)
{
    const uint32_t L = ly->L, nbytes = 4u * L, nbits = 32u * L;
    const uint32_t m = 4u * (ly->tab + L);
    const uint32_t cr = PKP_CR(PKA_MONTMUL2);
    uint32_t x = 4u * ly->tab, z = 4u * (ly->tab + 2u * L);

    pkp_wait();
    PKA_BPTR = m;
    PKA_A2PTR = m;
    PKA_R2PTR = m;
    for (uint32_t i = 0; i < nbits; i++) {
        uint32_t bit = window(d, nbytes, i, 1u);      /* while the previous one runs */
        pkp_wait();
        PKA_APTR = x;
        PKA_RPTR = z;
        PKA_CR = cr;
        uint32_t swap = (x ^ z) & value_barrier(0u - bit);
        x ^= swap;                                    /* e_i = 1: X = Z (and Z the old X) */
        z ^= swap;
    }
    pkp_run(PKA_SUB, m / 4u, m / 4u, m / 4u);          /* M = 0 */
    pkp_run(PKA_ADD, x / 4u, m / 4u, ly->y);           /* Y = X */
}
#endif

/* m^d R mod prime into Y (Montgomery form); R^2 mod prime stays in RR. */
static int crt_exp(const win_layout_t *ly, const uint8_t *prime, const uint8_t *d, const uint8_t *m)
{
#if RSA_PAIR
    pair_on = PKA_CAPS & PKA_CAPS_PAIR;
    if (pair_on) {
        crt_setup(ly, prime, m);
        crt_pow_pair(ly, d);
        return pkp_errors();
    }
#endif
    crt_setup(ly, prime, m);
#if RSA_TABLE_SRAM
    if (ly->window == 5u)
        crt_pow_sram(ly, d, 5u);
    else
        crt_pow_sram(ly, d, 4u);
#else
    if (ly->window == 4u)
        crt_pow(ly, d, 4u);
    else
        crt_pow(ly, d, 3u);
#endif
    return pkp_errors();
}

/* ---- the RSA operations ------------------------------------------------------ */

int rsa_get_public_key(rsa_key_t *key, uint8_t *n)
{
    const win_layout_t *ly = layout_for(key->nbits);

    if (!ly)
        return RSA_ERR_NBITS;
    pkp_init();
    TRY(public_n(ly, key));
    pka_fetch_be(ly->acc, n, 2u * ly->L);
    return RSA_OK;
}

int rsa_private(const rsa_key_t *key, const uint8_t *in, uint8_t *out)
{
    const win_layout_t *ly = layout_for(key->nbits);

    if (!ly)
        return RSA_ERR_NBITS;
    const uint32_t L = ly->L, t0 = ly->tab, t1 = t0 + L, t2 = t1 + L;
    pkp_init();

    /* The input must be below n (RSASP1, RSADP): never reduced silently. */
    TRY(public_n(ly, key));
    TRY(below_n(ly, in));

    /* S_q = m^dq mod q, converted out of Montgomery form into SQ. */
    TRY(crt_exp(ly, key->q, key->dq, in));
    pka_fill(t0, 0, L);
    pka_write(t0, 1);
    pkp_run(PKA_MONTMUL, ly->y, t0, ly->sq);            /* S_q = y (x) 1 */

    /* S_p R mod p, left in Montgomery form in Y. */
    TRY(crt_exp(ly, key->p, key->dp, in));

    /* h = qinv (S_p - S_q) mod p = qinv (x) (S_p R - S_q R). */
    pkp_run(PKA_SUB, ly->sq, ly->p, t0);                /* S_q - p */
    uint32_t sq = pick(pkp_carry(), ly->sq, t0);        /* S_q mod p (S_q < q < 2p) */
    pkp_run(PKA_MONTMUL, sq, ly->rr, t1);               /* S_q R */
    pkp_run(PKA_MODSUB, ly->y, t1, t1);                 /* (S_p - S_q) R */
    pkp_wait();
    pka_load_be(t2, key->qinv, L);
    pkp_run(PKA_MONTMUL, t2, t1, ly->y);                /* h */
    TRY(pkp_errors());

    /* M = S_q + h*q < n: the result (no final subtraction, as in the optimized variant). */
    split_copy(ly, ly->xh, ly->y);
    pka_fill(ly->mod1, 0xFFFFFFFFu, WIDE);
    pka_fill(ly->cw, 0, L);
    split_load(ly, ly->yq, key->q);
    TRY(wide_mul(ly));
    pkp_config(L, ly->mod1);
    pkp_run(PKA_ADD, ly->acc, ly->sq, ly->acc);
    pka_write(ly->cw, pkp_carry());
    pkp_run(PKA_ADD, ly->acc + L, ly->cw, ly->acc + L);
    uint32_t carry = pkp_carry();
    TRY(pkp_errors());
    if (carry)
        return RSA_ERR_CARRY;
    pka_fetch_be(ly->acc, out, 2u * L);
    return RSA_OK;
}
