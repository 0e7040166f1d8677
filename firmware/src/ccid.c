/*
 * CCID class: messages in usbd_msg, replies from ccid_reply (see ccid.h).
 */
#include "ccid.h"
#include "openpgp.h"
#include "usbd.h"

#define RSP_MAX (USBD_MSG_MAX - 10u)

static uint8_t ccid_reply[USBD_MSG_MAX];
static uint8_t text_msg[10];
static volatile uint32_t ccid_running;  /* an XfrBlock is being computed */
static uint8_t ccid_seq;
static uint32_t icc_powered;

/* bStatus: bmICCStatus 0 = present and active, 1 = present and inactive */
static uint8_t icc_status(void)
{
    return icc_powered ? 0x00u : 0x01u;
}

static void put_header(uint8_t *m, uint8_t type, uint32_t len, uint8_t slot, uint8_t seq,
                       uint8_t status, uint8_t error, uint8_t specific)
{
    m[0] = type;
    m[1] = (uint8_t)len;
    m[2] = (uint8_t)(len >> 8);
    m[3] = (uint8_t)(len >> 16);
    m[4] = (uint8_t)(len >> 24);
    m[5] = slot;
    m[6] = seq;
    m[7] = status;
    m[8] = error;
    m[9] = specific;
}

/* Called from the USB interrupt on each SOF while a command runs. */
void ccid_on_sof(void)
{
    if (!ccid_running || usbd_sofs % CCID_TEXT_MS != 0 || usbd_tx_busy())
        return;
    /* RDR_to_PC_DataBlock, bmCommandStatus = 2 (time extension), bError = 1 x BWT */
    put_header(text_msg, 0x80, 0, 0, ccid_seq, 0x80, 0x01, 0);
    usbd_send(text_msg, 10);
}

static uint32_t param_block(uint8_t *m, uint8_t slot, uint8_t seq)
{
    static const uint8_t t1[7] = {0x11, 0x10, 0x00, 0x45, 0x00, 0xFE, 0x00};
    put_header(m, 0x82, 7, slot, seq, icc_status(), 0, 0x01);
    for (uint32_t i = 0; i < 7; i++)
        m[10 + i] = t1[i];
    return 17;
}

void ccid_handle(void)
{
    uint8_t *m = usbd_msg;
    uint8_t *r = ccid_reply;
    usbd_wait_tx();     /* the last reply has left (a host may write before reading) */
    uint32_t rlen = 10;
    uint8_t type = m[0], slot = m[5], seq = m[6];
    uint32_t len = m[1] | (uint32_t)m[2] << 8 | (uint32_t)m[3] << 16 | (uint32_t)m[4] << 24;
    uint32_t got = usbd_msg_len;
    /* The reply's type: DataBlock for PowerOn/XfrBlock, Parameters for the
     * parameter commands, SlotStatus for the rest (CCID 6.1, table 6.1-1). */
    uint8_t rtype = (type == 0x62 || type == 0x6F) ? 0x80 : (type == 0x6C || type == 0x6D || type == 0x61) ? 0x82 : 0x81;

    if (got < 10u) {
        /* Not even a header: answer with what can be read of it. */
        put_header(r, 0x81, 0, 0, got > 6 ? seq : 0, 0x40u | icc_status(), 1, 0);
    } else if (usbd_msg_error || got != 10u + len) {
        put_header(r, rtype, 0, slot, seq, 0x40u | icc_status(), 1, 0);  /* bError 1: dwLength */
    } else if (slot != 0) {
        put_header(r, rtype, 0, slot, seq, 0x42, 5, 0);                    /* bError 5: bSlot; no ICC */
    } else if (type == 0x62) {                                             /* PC_to_RDR_IccPowerOn */
        icc_powered = 1;
        openpgp_reset();
        for (uint32_t i = 0; i < card_atr_len; i++)
            r[10 + i] = card_atr[i];
        put_header(r, 0x80, card_atr_len, slot, seq, 0x00, 0, 0);
        rlen = 10 + card_atr_len;
    } else if (type == 0x63) {                                             /* PC_to_RDR_IccPowerOff */
        icc_powered = 0;
        openpgp_reset();
        put_header(r, 0x81, 0, slot, seq, 0x01, 0, 0);
    } else if (type == 0x65) {                                             /* PC_to_RDR_GetSlotStatus */
        put_header(r, 0x81, 0, slot, seq, icc_status(), 0, 0);
    } else if (type == 0x6C || type == 0x6D || type == 0x61) {             /* Get/Reset/SetParameters */
        rlen = param_block(r, slot, seq);
    } else if (type == 0x6F) {                                             /* PC_to_RDR_XfrBlock */
        if (!icc_powered) {
            put_header(r, 0x80, 0, slot, seq, 0x41, 0xFE, 0);              /* ICC_MUTE: not powered */
        } else {
            ccid_seq = seq;
            ccid_running = 1;
            usbd_busy(1);
            uint32_t t0 = card_now_cycles();
            uint32_t n = apdu_process(m + 10, len, r + 10, RSP_MAX);
            card_cmd_cycles = card_now_cycles() - t0;
            usbd_busy(0);
            ccid_running = 0;
            put_header(r, 0x80, n, slot, seq, 0x00, 0, 0);
            rlen = 10 + n;
        }
    } else {
        put_header(r, rtype, 0, slot, seq, 0x40u | icc_status(), 0, 0);    /* CMD_NOT_SUPPORTED */
    }
    /* A time extension may still be on its way: the reply goes after it. */
    usbd_wait_tx();
    usbd_release();
    usbd_send(r, rlen);
}
