/*
 * USB device driver and the CCID reader's descriptors (see usbd.h, docs/usb.md).
 */
#include "usbd.h"

uint8_t usbd_msg[USBD_MSG_MAX];
volatile uint32_t usbd_msg_len;
volatile uint32_t usbd_msg_ready;
volatile uint32_t usbd_msg_error;
volatile uint32_t usbd_configured;
volatile uint32_t usbd_sofs;

/* ---- Descriptors (USB 2.0 chapter 9; CCID 1.1 section 5) -------------------- */
#define LE16(x) (uint8_t)((x) & 0xFFu), (uint8_t)((x) >> 8)
#define LE32(x) LE16((x) & 0xFFFFu), LE16((uint32_t)(x) >> 16)

static const uint8_t dev_desc[18] = {
    18, 1, LE16(0x0200), 0, 0, 0, 64,      /* USB 2.0, class per interface, EP0 64 bytes */
    LE16(0x1209), LE16(0x0001), LE16(0x0100), /* pid.codes test VID/PID, device 1.00 */
    1, 2, 3, 1,                             /* strings: manufacturer, product, serial; 1 config */
};

#define CFG_LEN (9 + 9 + 54 + 7 + 7 + 7)
static const uint8_t cfg_desc[CFG_LEN] = {
    9, 2, LE16(CFG_LEN), 1, 1, 0, 0x80, 50, /* 1 interface, bus powered, 100 mA */
    9, 4, 0, 0, 3, 0x0B, 0, 0, 0,           /* interface 0: 3 endpoints, class 0x0B (CCID) */
    54, 0x21, LE16(0x0110), 0, 0x07,        /* CCID 1.10, slot 0 only, 5V/3V/1.8V */
    LE32(2),                                /* dwProtocols: T=1 */
    LE32(4000), LE32(4000), 0,              /* clocks (kHz), no list */
    LE32(10752), LE32(10752), 0,            /* data rates (bps), no list */
    LE32(254), LE32(0), LE32(0),            /* IFSD, no synch protocols, no mechanics */
    LE32(0x000400FE),                       /* automatic everything, extended APDU exchange */
    LE32(USBD_MSG_MAX),                     /* dwMaxCCIDMessageLength */
    0xFF, 0xFF, LE16(0), 0, 1,              /* echo class for GetResponse/Envelope, no LCD, no PIN pad, 1 busy slot */
    7, 5, 0x01, 0x02, LE16(64), 0,          /* EP1 OUT bulk */
    7, 5, 0x81, 0x02, LE16(64), 0,          /* EP1 IN bulk */
    7, 5, 0x82, 0x03, LE16(8), 16,          /* EP2 IN interrupt, every 16 ms */
};
_Static_assert(sizeof cfg_desc == 93, "configuration descriptor length");

static const uint8_t str0[] = {4, 3, LE16(0x0409)};
static const uint8_t str1[] = {14, 3, 'p', 0, 'k', 0, 'a', 0, 's', 0, 'i', 0, 'm', 0};
static const uint8_t str2[] = {40, 3, 'p', 0, 'k', 0, 'a', 0, 's', 0, 'i', 0, 'm', 0, ' ', 0, 'O', 0, 'p', 0,
                               'e', 0, 'n', 0, 'P', 0, 'G', 0, 'P', 0, ' ', 0, 'c', 0, 'a', 0, 'r', 0, 'd', 0};
static const uint8_t str3[] = {18, 3, '0', 0, '0', 0, '0', 0, '0', 0, '0', 0, '0', 0, '0', 0, '1', 0};

/* ---- Packet buffers ------------------------------------------------------ */
static void buf_write(uint32_t pipe, const uint8_t *src, uint32_t n)
{
    volatile uint8_t *b = USB_BUF(pipe);
    for (uint32_t i = 0; i < n; i++)
        b[i] = src[i];
}

static void buf_read(uint32_t pipe, uint8_t *dst, uint32_t n)
{
    volatile uint8_t *b = USB_BUF(pipe);
    for (uint32_t i = 0; i < n; i++)
        dst[i] = b[i];
}

/* ---- EP0 ----------------------------------------------------------------- */
static const uint8_t *ep0_data;
static uint32_t ep0_left;
static uint32_t ep0_zlp;        /* a zero-length packet ends the data stage */
static uint32_t ep0_new_addr;   /* SET_ADDRESS takes effect after the status stage */
static uint8_t ep0_small[2];

static void ep0_stall(void)
{
    USB_PIPE(PIPE_EP0_IN) = USB_P_STALL;
    USB_PIPE(PIPE_EP0_OUT) = USB_P_STALL;
}

static void ep0_send_next(void)
{
    uint32_t n = ep0_left > 64u ? 64u : ep0_left;
    buf_write(PIPE_EP0_IN, ep0_data, n);
    ep0_data += n;
    ep0_left -= n;
    if (n < 64u)
        ep0_zlp = 0;
    USB_PIPE(PIPE_EP0_IN) = USB_P_ARM | n;
}

static void ep0_reply(const uint8_t *data, uint32_t len, uint32_t wlength)
{
    if (len > wlength)
        len = wlength;
    ep0_data = data;
    ep0_left = len;
    ep0_zlp = (len < wlength) && (len % 64u == 0);
    ep0_send_next();
}

static void ep0_status_in(void)
{
    ep0_left = 0;
    ep0_zlp = 0;
    ep0_data = 0;
    USB_PIPE(PIPE_EP0_IN) = USB_P_ARM | 0u;
}

static void bulk_arm_out(void)
{
    USB_PIPE(PIPE_BULK_OUT) = USB_P_ARM;
}

static void ep0_setup(void)
{
    uint8_t s[8];
    buf_read(PIPE_EP0_OUT, s, 8);
    uint32_t type = s[0], req = s[1];
    uint32_t value = s[2] | (uint32_t)s[3] << 8;
    uint32_t length = s[6] | (uint32_t)s[7] << 8;

    if (type == 0x80 && req == 6) {             /* GET_DESCRIPTOR */
        uint32_t dtype = value >> 8, index = value & 0xFFu;
        if (dtype == 1)
            ep0_reply(dev_desc, sizeof dev_desc, length);
        else if (dtype == 2)
            ep0_reply(cfg_desc, sizeof cfg_desc, length);
        else if (dtype == 3 && index == 0)
            ep0_reply(str0, sizeof str0, length);
        else if (dtype == 3 && index == 1)
            ep0_reply(str1, sizeof str1, length);
        else if (dtype == 3 && index == 2)
            ep0_reply(str2, sizeof str2, length);
        else if (dtype == 3 && index == 3)
            ep0_reply(str3, sizeof str3, length);
        else
            ep0_stall();
    } else if (type == 0x00 && req == 5) {      /* SET_ADDRESS */
        ep0_new_addr = 0x80u | (value & 0x7Fu);
        ep0_status_in();
    } else if (type == 0x00 && req == 9) {      /* SET_CONFIGURATION */
        usbd_configured = value == 1;
        if (usbd_configured) {
            static const uint8_t slot_change[2] = {0x50, 0x03};  /* CCID RDR_to_PC_NotifySlotChange: slot 0 present, changed */
            USB_PIPE(PIPE_BULK_IN) = 0;
            bulk_arm_out();
            usbd_notify(slot_change, 2);
        }
        ep0_status_in();
    } else if (type == 0x80 && req == 8) {      /* GET_CONFIGURATION */
        ep0_small[0] = (uint8_t)usbd_configured;
        ep0_reply(ep0_small, 1, length);
    } else if ((type & 0x7Fu) <= 2 && (type & 0x80u) && req == 0) {   /* GET_STATUS */
        ep0_small[0] = 0;
        ep0_small[1] = 0;
        ep0_reply(ep0_small, 2, length);
    } else if (type == 0x21 && req == 1) {      /* CCID ABORT: nothing runs that could be */
        ep0_status_in();
    } else {
        ep0_stall();
    }
}

/* ---- Bulk ---------------------------------------------------------------- */
static const uint8_t *tx_data;
static uint32_t tx_left;
static volatile uint32_t tx_busy;
static uint32_t tx_zlp;

static void tx_next(void)
{
    uint32_t n = tx_left > 64u ? 64u : tx_left;
    buf_write(PIPE_BULK_IN, tx_data, n);
    tx_data += n;
    tx_left -= n;
    tx_zlp = (n == 64u && tx_left == 0);
    USB_PIPE(PIPE_BULK_IN) = USB_P_ARM | n;
}

void usbd_send(const uint8_t *data, uint32_t len)
{
    __disable_irq();
    tx_data = data;
    tx_left = len;
    tx_busy = 1;
    tx_next();
    __enable_irq();
}

uint32_t usbd_tx_busy(void)
{
    return tx_busy;
}

void usbd_wait_tx(void)
{
    __disable_irq();
    while (tx_busy) {
        __WFI();
        __enable_irq();
        __ISB();
        __disable_irq();
    }
    __enable_irq();
}

void usbd_wait_msg(void)
{
    __disable_irq();
    while (!usbd_msg_ready) {
        __WFI();
        __enable_irq();
        __ISB();
        __disable_irq();
    }
    __enable_irq();
}

static void bulk_in_done(void)
{
    if (tx_left) {
        tx_next();
    } else if (tx_zlp) {
        tx_zlp = 0;
        USB_PIPE(PIPE_BULK_IN) = USB_P_ARM | 0u;
    } else {
        tx_busy = 0;
    }
}

static void bulk_out_rx(void)
{
    uint32_t n = USB_PIPE(PIPE_BULK_OUT) & USB_P_COUNT;
    uint32_t have = usbd_msg_len;
    if (have == 0 && n == 0) {          /* a stray zero-length packet */
        bulk_arm_out();
        return;
    }
    if (have + n > USBD_MSG_MAX) {
        usbd_msg_error = 2;             /* keep counting, store nothing more */
    } else {
        buf_read(PIPE_BULK_OUT, usbd_msg + have, n);
    }
    have += n;
    usbd_msg_len = have;
    uint32_t want = 0xFFFFFFFFu;
    if (have >= 10 && have <= USBD_MSG_MAX)
        want = 10u + (usbd_msg[1] | (uint32_t)usbd_msg[2] << 8 | (uint32_t)usbd_msg[3] << 16 |
                      (uint32_t)usbd_msg[4] << 24);
    if (have >= want) {
        usbd_msg_ready = 1;             /* NAK further OUTs until the reply */
    } else if (n < 64u) {
        if (!usbd_msg_error)
            usbd_msg_error = 1;         /* a short packet before dwLength was reached */
        usbd_msg_ready = 1;
    } else {
        bulk_arm_out();
    }
}

void usbd_release(void)
{
    __disable_irq();
    usbd_msg_len = 0;
    usbd_msg_error = 0;
    usbd_msg_ready = 0;
    bulk_arm_out();
    __enable_irq();
}

void usbd_busy(uint32_t on)
{
    __disable_irq();
    usbd_sofs = 0;
    USB_ISTR = USB_IS_SOF;
    if (on)
        USB_IER |= USB_IS_SOF;
    else
        USB_IER &= ~USB_IS_SOF;
    __enable_irq();
}

void usbd_notify(const uint8_t *data, uint32_t len)
{
    buf_write(PIPE_INTR_IN, data, len);
    USB_PIPE(PIPE_INTR_IN) = USB_P_ARM | len;
}

/* ---- The interrupt ----------------------------------------------------------- */
void USB_IRQHandler(void)
{
    uint32_t is = USB_ISTR & USB_IER;
    USB_ISTR = is;
    if (is & USB_IS_RESET) {
        USB_DADDR = 0;
        usbd_configured = 0;
        ep0_new_addr = 0;
        usbd_msg_len = 0;
        usbd_msg_ready = 0;
        usbd_msg_error = 0;
        tx_busy = 0;
    }
    if (is & USB_IS_PIPE(PIPE_EP0_OUT)) {
        if (USB_PIPE(PIPE_EP0_OUT) & USB_P_SETUP)
            ep0_setup();
        /* else: the status stage of an IN request ended */
    }
    if (is & USB_IS_PIPE(PIPE_EP0_IN)) {
        if (ep0_new_addr) {
            USB_DADDR = ep0_new_addr & 0x7Fu;
            ep0_new_addr = 0;
        }
        if (ep0_data) {
            if (ep0_left || ep0_zlp) {
                ep0_send_next();
            } else {
                ep0_data = 0;
                USB_PIPE(PIPE_EP0_OUT) = USB_P_ARM;   /* the status stage */
            }
        }
    }
    if (is & USB_IS_PIPE(PIPE_BULK_OUT))
        bulk_out_rx();
    if (is & USB_IS_PIPE(PIPE_BULK_IN))
        bulk_in_done();
    if (is & USB_IS_SOF) {
        usbd_sofs++;
        ccid_on_sof();
    }
}

void usbd_init(void)
{
    USB_ISTR = 0xFFFFFFFFu;
    USB_IER = USB_IS_RESET | USB_IS_PIPE(0) | USB_IS_PIPE(1) | USB_IS_PIPE(2) | USB_IS_PIPE(3) | USB_IS_PIPE(4);
    nvic_clear_pending_irq(USB_IRQ);
    nvic_enable_irq(USB_IRQ);
    USB_CTRL = USB_CTRL_CONNECT;
}
